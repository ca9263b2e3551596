// Jest on Node 20 cannot load ESM from node_modules (Nest 12 ships only ESM), so the ESM
// packages tests use are compiled to CommonJS here. `import.meta.url` has no CommonJS
// spelling in TypeScript's output, so it is rewritten to the file's URL first; and the
// `const require = createRequire(import.meta.url)` idiom is dropped (CommonJS has `require`)
// and `import.meta.resolve`/`dirname` become `require.resolve`/`__dirname` (@nestjs/terminus).
const ts = require('typescript');

module.exports = {
  process(source, filename) {
    const withoutImportMeta = source
      .replace(/^const require = createRequire\(import\.meta\.url\);$/gm, '')
      .replace(/import\.meta\.resolve\(/g, 'require.resolve(')
      .replace(/import\.meta\.dirname/g, '__dirname')
      .replace(/import\.meta\.url/g, "require('url').pathToFileURL(__filename).href");
    const { outputText, sourceMapText } = ts.transpileModule(withoutImportMeta, {
      fileName: filename,
      compilerOptions: {
        module: ts.ModuleKind.CommonJS,
        target: ts.ScriptTarget.ES2022,
        allowJs: true,
        esModuleInterop: true,
        sourceMap: true,
      },
    });
    return { code: outputText, map: sourceMapText };
  },
  getCacheKey(source, filename) {
    return require('crypto')
      .createHash('sha1')
      .update('esm-to-cjs-v4\0' + filename + '\0' + source)
      .digest('hex');
  },
};
