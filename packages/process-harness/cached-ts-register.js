'use strict';
/**
 * `node -r` hook for the test suites' child processes (workers, offline servers, fixtures):
 * transpiles `.ts` files as `ts-node/register/transpile-only` does (one file at a time, no type
 * check; the project sets `isolatedModules`), but keeps each result on disk by content hash.
 * A fault scenario starts three or four processes at once; with the cache each loads in about
 * 0.5 s instead of 2 s of transpiling on a 2-core machine. A changed file (a mutant's copy of
 * `lib`, an edit) has another hash and is transpiled afresh.
 */
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const compilerOptions = {
  module: 'commonjs',
  target: 'es2022',
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  esModuleInterop: true,
  resolveJsonModule: true,
  isolatedModules: true,
  inlineSourceMap: true,
  inlineSources: false,
};

let typescript;
const compiler = () => (typescript ??= require('typescript'));
const typescriptVersion = require('typescript/package.json').version;
const cacheDir =
  process.env.TS_TRANSPILE_CACHE_DIR ??
  path.join(
    os.tmpdir(),
    `nestjs-mongo-lock-ts-${hash(typescriptVersion + JSON.stringify(compilerOptions)).slice(0, 12)}`,
  );

function hash(text) {
  return crypto.createHash('sha256').update(text).digest('hex');
}

function transpiled(filename) {
  const source = fs.readFileSync(filename, 'utf8');
  const cached = path.join(cacheDir, `${hash(`${filename}\0${source}`)}.js`);
  try {
    return fs.readFileSync(cached, 'utf8');
  } catch {
    // Not cached yet: transpile below.
  }
  const code = compiler().transpileModule(source, {
    compilerOptions,
    fileName: filename,
  }).outputText;
  // Written whole then renamed, so a process starting beside this one never reads half a file.
  fs.mkdirSync(cacheDir, { recursive: true });
  const partial = `${cached}.${process.pid}.tmp`;
  fs.writeFileSync(partial, code);
  fs.renameSync(partial, cached);
  return code;
}

process.setSourceMapsEnabled(true);
require.extensions['.ts'] = function loadTypeScript(module, filename) {
  module._compile(transpiled(filename), filename);
};
