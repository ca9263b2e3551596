import { mkdtempSync, rmSync, symlinkSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ts from 'typescript';
import * as ts51 from 'typescript-5.1';

// The two compilers the documents' examples are type-checked with: the project's TypeScript
// against the library's sources, and the lowest the README claims (5.1) against the declaration
// files the package ships, with the options of a 5.1 app.

export const root = join(__dirname, '../..');

export interface DocCompiler {
  /** For test names: `TypeScript 6.0.3`. */
  name: string;
  /** The compiler's API (5.1's as far as it is the same as the project's). */
  ts: typeof ts;
  options: ts.CompilerOptions;
}

const entryPoints = ['', '/testing', '/health', '/board'];

/** `paths` for the package's entry points, each to `<dir><entry>/index.<extension>`. */
function packagePaths(dir: string, extension: string): ts.MapLike<string[]> {
  return Object.fromEntries(
    entryPoints.map((entry) => [`nestjs-mongo-lock${entry}`, [`${dir}${entry}/index${extension}`]]),
  );
}

/** The project's TypeScript, its tsconfig.json, the package from its sources. */
export function currentCompiler(): DocCompiler {
  const { config } = ts.readConfigFile(join(root, 'tsconfig.json'), ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config, ts.sys, root);
  return {
    name: `TypeScript ${ts.version}`,
    ts,
    options: {
      ...parsed.options,
      noEmit: true,
      noUnusedLocals: false,
      // ES modules, so that examples may `await` at the top level as in a function body.
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      paths: packagePaths(join(root, 'lib'), '.ts'),
    },
  };
}

/**
 * The package's declaration files as `npm run build` would emit them (tsconfig.build.json), in
 * `<dir>/dist` of a new temporary `dir` whose `node_modules` links to the repository's, so that
 * their imports of Nest, mongodb and the rest resolve as they do in an app. `dispose` removes it.
 */
export function emitDeclarations(): { dir: string; dispose(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'nestjs-mongo-lock-dts-'));
  const modules = join(dir, 'node_modules');
  const dispose = () => {
    unlinkSync(modules); // the link, never what it points to
    rmSync(dir, { recursive: true, force: true });
  };
  symlinkSync(join(root, 'node_modules'), modules, 'dir');
  const { config } = ts.readConfigFile(join(root, 'tsconfig.build.json'), ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config, ts.sys, root);
  const program = ts.createProgram(parsed.fileNames, {
    ...parsed.options,
    declaration: true,
    emitDeclarationOnly: true,
    declarationMap: false,
    sourceMap: false,
    outDir: join(dir, 'dist'),
  });
  const { emitSkipped, diagnostics } = program.emit();
  if (emitSkipped || diagnostics.length > 0) {
    dispose();
    throw new Error(
      `declarations not emitted: ${ts.formatDiagnostics(diagnostics, ts.createCompilerHost({}))}`,
    );
  }
  return { dir, dispose };
}

/** TypeScript 5.1 with a 5.1 app's options, the package from the declarations in `dir/dist`. */
export function lowestCompiler(dir: string): DocCompiler {
  return {
    name: `TypeScript ${ts51.version}`,
    ts: ts51 as unknown as typeof ts,
    options: {
      target: ts51.ScriptTarget.ES2022,
      // 5.1 has no esnext.disposable: `await using` is for 5.2 and later.
      lib: ['lib.es2023.d.ts'],
      module: ts51.ModuleKind.ESNext,
      moduleResolution: ts51.ModuleResolutionKind.Bundler, // since 5.0
      types: ['node', 'jest'],
      strict: true,
      esModuleInterop: true,
      experimentalDecorators: true, // as Nest apps compile
      emitDecoratorMetadata: true,
      // What Nest's starters set. It spares only .d.ts files, whose diagnostics are not asked
      // for here anyway; `declarationErrors` checks the package's own without it.
      skipLibCheck: true,
      noEmit: true,
      paths: packagePaths(join(dir, 'dist'), '.d.ts'),
    },
  };
}

/**
 * Type-checks in-memory `files` (file name to code) in one program; returns the syntactic and
 * semantic diagnostics of one of them.
 */
export function compile(
  { ts: compiler, options }: DocCompiler,
  files: ReadonlyMap<string, string>,
): (file: string) => readonly ts.Diagnostic[] {
  const host = compiler.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, language, ...rest) =>
    files.has(name)
      ? compiler.createSourceFile(name, files.get(name)!, language)
      : getSourceFile(name, language, ...rest);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => files.has(name) || fileExists(name);
  const readFile = host.readFile.bind(host);
  host.readFile = (name) => files.get(name) ?? readFile(name);
  const program = compiler.createProgram([...files.keys()], options, host);
  return (file) => {
    const sourceFile = program.getSourceFile(file)!;
    return [
      ...program.getSyntacticDiagnostics(sourceFile),
      ...program.getSemanticDiagnostics(sourceFile),
    ];
  };
}

/**
 * The diagnostics of the package's declaration files in `dir/dist` under `compiler` with
 * `skipLibCheck: false` (as an app with it off would see them), each as `file:line: message`.
 */
export function declarationErrors(compiler: DocCompiler, dir: string): string[] {
  const options = { ...compiler.options, skipLibCheck: false };
  const entries = entryPoints.map((entry) => join(dir, `dist${entry}/index.d.ts`));
  const program = compiler.ts.createProgram(entries, options);
  const ours = program
    .getSourceFiles()
    .filter((file) => file.fileName.startsWith(join(dir, 'dist')));
  return [
    ...program.getOptionsDiagnostics(),
    ...program.getGlobalDiagnostics(),
    ...ours.flatMap((file) => [
      ...program.getSyntacticDiagnostics(file),
      ...program.getSemanticDiagnostics(file),
    ]),
  ].map((diagnostic) => {
    const message = compiler.ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    if (diagnostic.file === undefined || diagnostic.start === undefined) return message;
    const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
    return `${diagnostic.file.fileName.slice(dir.length + 1)}:${line + 1}: TS${diagnostic.code} ${message}`;
  });
}
