#!/usr/bin/env node
// The compatibility job: `npm run test:compat [-- [--no-build | --tarball FILE] [--only NAME]
// [--keep]]`.
//
// Packs the library as it would be published (`npm pack`), installs the tarball into fresh
// minimal Nest apps generated from compat/template (one per row of APPS, which together cover
// every supported major), then in each app: `tsc` with `strict` and `skipLibCheck: false`,
// for the app with classic `node` resolution where its TypeScript finds each entry point's
// types (`typesVersions`), boot against the offline MongoDB test server (or MONGODB_URI), and
// the checks of compat/template/src/checks.ts, then those of its src/peers.ts (below), then
// those of compat/template/src/testing-checks.ts (the `nestjs-mongo-lock/testing` entry point,
// without MongoDB). Exits 1 if any app fails.
//
// Optional peers: each app installs only the peers its stack declares. Those without `peers`
// have neither `@opentelemetry/api` nor `@nestjs/terminus` (src/peers.ts is
// template/peers/without.ts: the main entry's declarations must type-check, and the app run,
// without them); the one with `peers` installs both (template/peers/with.ts: the
// `nestjs-mongo-lock/health` entry, and the library reporting to the app's OpenTelemetry
// providers). So that nothing else supplies a package, the apps live OUTSIDE the repository
// (whose node_modules has every peer): in a fresh folder under the system's temporary folder, or
// in COMPAT_APPS_DIR; the run refuses a folder inside the repository or under any node_modules.
//
// The tarball and, unless COMPAT_NPM_CACHE names another folder, the npm cache that keeps later
// runs off the network go to compat/.work/ (git-ignored). The apps are removed after a run where
// all passed, unless --keep.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, realpathSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
const work = path.join(here, '.work');
const cacheDir = process.env.COMPAT_NPM_CACHE
  ? path.resolve(process.env.COMPAT_NPM_CACHE)
  : path.join(work, 'npm-cache');

const INSTALL_TIMEOUT_MS = 300_000;
const TSC_TIMEOUT_MS = 180_000;
const RUN_TIMEOUT_MS = 60_000;

/** compilerOptions by module flavour; every app adds strict, skipLibCheck: false and decorators. */
const FLAVOURS = {
  // What the Nest 10 starter generates: CommonJS, classic `node` resolution, which ignores
  // `exports`: it reads `types` for the main entry and the package's `typesVersions` for
  // `nestjs-mongo-lock/testing` and `/health` (the `entries` step checks every one).
  'cjs-node10': {
    type: 'commonjs',
    compilerOptions: { module: 'commonjs', moduleResolution: 'node', target: 'ES2021' },
    checkEntryTypes: true,
  },
  // A CommonJS package with Node's resolution (reads `exports`), as the Nest 11 starter.
  'cjs-nodenext': {
    type: 'commonjs',
    compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'ES2023' },
  },
  // "type": "module".
  esm: {
    type: 'module',
    compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'ES2023' },
  },
};

/**
 * The covering set: each Nest major (10, 11, 12), mongodb major (6, 7), TypeScript from the
 * oldest supported (5.1) through the latest 5.x and 6.x to 7, CommonJS and ESM, Express and
 * Fastify appear at least once. Ranges as a new user gets them; the Nest 10 app, shaped like the
 * Nest 10 starter, also takes the lowest versions the peer ranges admit for mongodb and
 * reflect-metadata (rxjs: see below). Listed in the order they install: the slowest to
 * type-check first, so that they type-check while the others install.
 */
const APPS = [
  {
    name: 'nest10-express-cjs-ts5.1-mongodb6.0',
    nest: '^10.0.0',
    platform: 'express',
    flavour: 'cjs-node10',
    typescript: '~5.1.6', // what the Nest 10 starter pins
    typesNode: '^20.19.0',
    // The lowest rxjs the peer range names (7.1 has no operators such as `share` at its root).
    deps: { mongodb: '~6.0.0', rxjs: '~7.2.0', 'reflect-metadata': '~0.1.13' },
    devDeps: { '@types/express': '^4.17.17' }, // as the Nest 10 starter
  },
  {
    name: 'nest11-fastify-esm-ts5.x-mongodb7-otel-terminus',
    nest: '^11.0.0',
    platform: 'fastify',
    flavour: 'esm',
    typescript: '^5.9.0',
    typesNode: '^20.19.0',
    deps: { mongodb: '^7.0.0', rxjs: '^7.8.0', 'reflect-metadata': '^0.2.0' },
    // The one app with the optional peers (the others prove the library needs neither); terminus
    // 11, the oldest major the peer range admits.
    peers: { '@opentelemetry/api': '^1.3.0', '@nestjs/terminus': '^11.0.0' },
  },
  {
    name: 'nest12-express-esm-ts6-mongodb6',
    nest: '^12.0.0',
    platform: 'express',
    flavour: 'esm',
    typescript: '^6.0.0',
    typesNode: '^20.19.0',
    deps: { mongodb: '^6.0.0', rxjs: '^7.8.0', 'reflect-metadata': '^0.2.0' },
    devDeps: { '@types/express': '^5.0.0' },
    // The strictest optional check an app may turn on: the declarations must pass it too.
    compilerOptions: { exactOptionalPropertyTypes: true },
  },
  {
    name: 'nest12-fastify-cjs-ts7-mongodb7',
    nest: '^12.0.0',
    platform: 'fastify',
    flavour: 'cjs-nodenext',
    typescript: '^7.0.0', // npm's `latest` since 7.0 (the native compiler)
    typesNode: '^20.19.0',
    deps: { mongodb: '^7.0.0', rxjs: '^7.8.0', 'reflect-metadata': '^0.2.0' },
  },
];

/** Installed versions worth showing in the summary. */
const SHOWN_PACKAGES = [
  '@nestjs/core',
  'mongodb',
  'typescript',
  'rxjs',
  'reflect-metadata',
  '@types/node',
  '@opentelemetry/api',
  '@nestjs/terminus',
  'express',
  'fastify',
];

const seconds = (ms) => `${(ms / 1000).toFixed(1)}s`;
const log = (message) => process.stdout.write(`[compat] ${message}\n`);

/** A tiny semaphore: runs the tasks given to it, at most `size` at once, in order. */
function limiter(size) {
  let active = 0;
  const queue = [];
  const next = () => {
    if (active >= size || queue.length === 0) return;
    active++;
    const { task, resolve, reject } = queue.shift();
    task()
      .then(resolve, reject)
      .finally(() => {
        active--;
        next();
      });
  };
  return (task) =>
    new Promise((resolve, reject) => {
      queue.push({ task, resolve, reject });
      next();
    });
}

/**
 * Runs a command, output to `logFile` (and kept for the report). Resolves with the exit code,
 * the output (stdout and stderr, and stdout alone) and the time taken; never rejects for a
 * failing command.
 */
async function exec(command, args, { cwd, env, logFile, timeoutMs }) {
  const started = performance.now();
  const child = spawn(command, args, {
    cwd,
    env: env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let stdout = '';
  child.stdout.on('data', (chunk) => {
    output += chunk.toString();
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk) => (output += chunk.toString()));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, timeoutMs);
  const [code, signal] = await once(child, 'close');
  clearTimeout(timer);
  if (timedOut) output += `\n[compat] killed after ${seconds(timeoutMs)}\n`;
  if (logFile) await writeFile(logFile, `$ ${command} ${args.join(' ')}\n${output}`);
  const ms = performance.now() - started;
  return { code: timedOut ? 'timeout' : (code ?? signal), output, stdout, ms };
}

/** npm through the same Node and npm that run this script. */
function npm(args, options) {
  const npmCli = process.env.npm_execpath;
  return npmCli && npmCli.endsWith('.js')
    ? exec(process.execPath, [npmCli, ...args], options)
    : exec('npm', args, options);
}

/** The project's offline MongoDB test server (packages/mongo-offline) in its own process. */
async function startOfflineMongo() {
  const child = spawn(
    process.execPath,
    [
      '-r',
      './packages/process-harness/cached-ts-register.js',
      'packages/mongo-offline/cli.ts',
      '--port',
      '0',
    ],
    {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const lines = createInterface({ input: child.stdout });
  // A server that has not printed its URI by then is stuck.
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const uri = await Promise.race([
    once(lines, 'line').then(([line]) => String(line).trim()),
    once(child, 'exit').then(([code]) => {
      throw new Error(`offline MongoDB exited (${code}) before printing its URI:\n${stderr}`);
    }),
  ]).finally(() => clearTimeout(timer));
  lines.close();
  child.stdout.resume();
  if (!uri.startsWith('mongodb://')) throw new Error(`offline MongoDB printed ${uri}`);
  return {
    uri,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * The folder the apps go in: COMPAT_APPS_DIR (emptied) or a fresh one under the temporary
 * folder. Refused inside the repository or below a node_modules folder: Node and tsc look for
 * packages in every ancestor's node_modules, so an app there could see a package (an optional
 * peer above all) it does not install.
 */
async function makeAppsDir() {
  let dir;
  if (process.env.COMPAT_APPS_DIR) {
    dir = path.resolve(process.env.COMPAT_APPS_DIR);
  } else {
    await mkdir(tmpdir(), { recursive: true });
    dir = await mkdtemp(path.join(tmpdir(), 'nestjs-mongo-lock-compat-'));
  }
  const inRepository = path.relative(root, dir);
  if (!inRepository.startsWith('..') && !path.isAbsolute(inRepository)) {
    throw new Error(`the apps folder ${dir} is inside the repository; see compat/run.mjs`);
  }
  for (let parent = path.dirname(dir); ; parent = path.dirname(parent)) {
    if (path.basename(parent) === 'node_modules' || existsSync(path.join(parent, 'node_modules'))) {
      throw new Error(`the apps folder ${dir} is below ${parent}, which has node_modules`);
    }
    if (path.dirname(parent) === parent) break;
  }
  if (process.env.COMPAT_APPS_DIR) await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  return dir;
}

async function generateApp(app, tarball, appsDir) {
  const dir = path.join(appsDir, app.name);
  const flavour = FLAVOURS[app.flavour];
  const platformPackage = `@nestjs/platform-${app.platform}`;
  const packageJson = {
    name: `compat-${app.name.replace(/[^a-z0-9-]/g, '-')}`,
    version: '0.0.0',
    private: true,
    type: flavour.type,
    dependencies: {
      '@nestjs/common': app.nest,
      '@nestjs/core': app.nest,
      [platformPackage]: app.nest,
      'nestjs-mongo-lock': `file:${tarball}`,
      ...app.deps,
      ...app.peers,
    },
    devDependencies: {
      '@types/node': app.typesNode,
      typescript: app.typescript,
      ...app.devDeps,
    },
  };
  const tsconfig = {
    compilerOptions: {
      ...flavour.compilerOptions,
      ...app.compilerOptions,
      strict: true,
      skipLibCheck: false,
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
      isolatedModules: true,
      esModuleInterop: true,
      forceConsistentCasingInFileNames: true,
      noEmitOnError: true,
      types: ['node'],
      rootDir: 'src',
      outDir: 'dist',
    },
    include: ['src'],
  };
  await mkdir(dir, { recursive: true });
  await cp(path.join(here, 'template', 'src'), path.join(dir, 'src'), { recursive: true });
  await cp(
    path.join(here, 'template', 'platform', `${app.platform}.ts`),
    path.join(dir, 'src', 'platform.ts'),
  );
  await cp(
    path.join(here, 'template', 'peers', app.peers ? 'with.ts' : 'without.ts'),
    path.join(dir, 'src', 'peers.ts'),
  );
  await writeFile(path.join(dir, 'package.json'), `${JSON.stringify(packageJson, null, 2)}\n`);
  await writeFile(path.join(dir, 'tsconfig.json'), `${JSON.stringify(tsconfig, null, 2)}\n`);
  return dir;
}

async function installedVersions(dir) {
  const versions = {};
  for (const name of SHOWN_PACKAGES) {
    try {
      const file = path.join(dir, 'node_modules', name, 'package.json');
      versions[name] = JSON.parse(await readFile(file, 'utf8')).version;
    } catch {
      // not installed in this app (express in a Fastify app, …)
    }
  }
  return versions;
}

/**
 * Where the app's own TypeScript finds the types of each entry point the package's `exports`
 * lists (`nestjs-mongo-lock`, `/testing`, `/health`), under the app's compilerOptions: each must
 * be the declaration file `exports` names for it. For classic `node` resolution, which ignores
 * `exports`, this is the check on `types` and `typesVersions`; the app's tsc covers the entries
 * it imports, this one `/health` too, which an app without `@nestjs/terminus` cannot import.
 * Resolves like `exec` (code 0 or 1, output, ms); one `ok - ` line per entry.
 */
async function checkEntryTypes(dir, compilerOptions, logFile) {
  const started = performance.now();
  const lines = [];
  let failed = false;
  try {
    const ts = createRequire(path.join(dir, 'package.json'))('typescript');
    const { options, errors } = ts.convertCompilerOptionsFromJson(compilerOptions, dir);
    if (errors.length > 0) throw new Error(ts.flattenDiagnosticMessageText(errors[0].messageText));
    const packageDir = path.join(dir, 'node_modules', 'nestjs-mongo-lock');
    const manifest = JSON.parse(await readFile(path.join(packageDir, 'package.json'), 'utf8'));
    const importer = path.join(dir, 'src', 'main.ts');
    for (const [subpath, target] of Object.entries(manifest.exports)) {
      if (typeof target !== 'object' || target === null || !target.types) continue; // package.json
      const specifier = `nestjs-mongo-lock${subpath.slice(1)}`;
      const expected = realpathSync(path.join(packageDir, target.types));
      const found = ts.resolveModuleName(specifier, importer, options, ts.sys).resolvedModule;
      const got = found ? realpathSync(found.resolvedFileName) : undefined;
      const shown = got ? path.relative(packageDir, got) : 'nothing';
      if (got === expected) {
        lines.push(
          `ok - ${specifier}: types ${shown} (moduleResolution ${compilerOptions.moduleResolution})`,
        );
      } else {
        failed = true;
        lines.push(`FAILED - ${specifier}: types ${shown}, expected ${target.types}`);
      }
    }
  } catch (error) {
    failed = true;
    lines.push(`FAILED - ${error instanceof Error ? error.message : String(error)}`);
  }
  const output = `${lines.join('\n')}\n`;
  await writeFile(logFile, output);
  return { code: failed ? 1 : 0, output, ms: performance.now() - started };
}

/** install → tsc → run for one app; `io` gates installs, `cpu` the CPU-bound steps. */
async function testApp(app, index, dir, { mongo, io, cpu }) {
  const result = { app, steps: {}, failed: null, versions: {}, checks: [] };
  const logFile = (step) => path.join(dir, `${step}.log`);
  const stepDone = (step, outcome) => {
    result.steps[step] = outcome.ms;
    const ok = outcome.code === 0;
    log(`${app.name}: ${step} ${ok ? 'ok' : `FAILED (${outcome.code})`} in ${seconds(outcome.ms)}`);
    if (!ok) result.failed = { step, output: outcome.output };
    return ok;
  };

  const install = await io(() =>
    npm(
      [
        'install',
        '--prefer-offline',
        '--no-audit',
        '--no-fund',
        '--no-update-notifier',
        '--loglevel=error',
        `--cache=${cacheDir}`,
      ],
      { cwd: dir, logFile: logFile('install'), timeoutMs: INSTALL_TIMEOUT_MS },
    ),
  );
  if (!stepDone('install', install)) return result;
  result.versions = await installedVersions(dir);

  const tsc = await cpu(() =>
    exec(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json'], {
      cwd: dir,
      logFile: logFile('tsc'),
      timeoutMs: TSC_TIMEOUT_MS,
    }),
  );
  if (!stepDone('tsc', tsc)) return result;

  const flavour = FLAVOURS[app.flavour];
  if (flavour.checkEntryTypes) {
    const entries = await cpu(() =>
      checkEntryTypes(dir, flavour.compilerOptions, logFile('entries')),
    );
    result.checks.push(...entries.output.split('\n').filter((line) => line.startsWith('ok - ')));
    if (!stepDone('entries', entries)) return result;
  }

  const { uri } = await mongo;
  const run = await cpu(() =>
    exec(process.execPath, ['dist/main.js'], {
      cwd: dir,
      // Without NODE_PATH, which Node would search for packages the app does not install.
      env: { ...withoutNodePath(process.env), MONGODB_URI: uri, COMPAT_DB: `compat_${index}` },
      logFile: logFile('run'),
      timeoutMs: RUN_TIMEOUT_MS,
    }),
  );
  result.checks.push(...run.output.split('\n').filter((line) => line.startsWith('ok - ')));
  if (run.code === 'timeout' && run.output.includes('all checks passed')) {
    run.output += '\n[compat] the checks passed, but the app did not end after app.close()\n';
  }
  stepDone('run', run);
  return result;
}

function withoutNodePath(env) {
  const { NODE_PATH: _ignored, ...rest } = env;
  return rest;
}

function parseArguments(argv) {
  const options = { build: true, only: null, tarball: null, keep: false };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--no-build') options.build = false;
    else if (argv[i] === '--only') options.only = argv[++i];
    else if (argv[i] === '--tarball') options.tarball = path.resolve(argv[++i]);
    else if (argv[i] === '--keep') options.keep = true;
    else throw new Error(`unknown argument ${argv[i]} (--no-build, --tarball F, --only N, --keep)`);
  }
  return options;
}

async function main() {
  const options = parseArguments(process.argv.slice(2));
  const started = performance.now();
  const apps = APPS.filter((app) => !options.only || app.name.includes(options.only));
  if (apps.length === 0) throw new Error(`no app matches ${options.only}`);
  const appsDir = await makeAppsDir();

  const mongo = process.env.MONGODB_URI
    ? Promise.resolve({ uri: process.env.MONGODB_URI, stop: async () => {} })
    : startOfflineMongo();
  mongo.catch(() => {}); // awaited (and reported) where it is used

  try {
    const tarball = options.tarball ?? (await packLibrary(options.build));
    log(`npm cache ${path.relative(root, cacheDir) || cacheDir}, apps in ${appsDir}`);
    const cpu = limiter(availableParallelism());
    // Fewer installs at once than apps, so that the first apps type-check while the last install.
    const io = limiter(Number(process.env.COMPAT_INSTALL_JOBS) || 2);
    const dirs = [];
    for (const app of apps) dirs.push(await generateApp(app, tarball, appsDir));
    const results = await Promise.all(
      apps.map((app, index) => testApp(app, index, dirs[index], { mongo, io, cpu })),
    );
    report(results, performance.now() - started);
    const passed = results.every((result) => !result.failed);
    // Kept when something failed (each app has its install.log, tsc.log and run.log), or asked.
    if (passed && !options.keep) await rm(appsDir, { recursive: true, force: true });
    else log(`apps kept in ${appsDir}`);
    return passed;
  } finally {
    await mongo.then(
      (server) => server.stop(),
      (error) => log(String(error.message)),
    );
  }
}

/** `npm run build` (unless told not to), then `npm pack`; the tarball's path. */
async function packLibrary(shouldBuild) {
  if (shouldBuild) {
    const build = await npm(['run', 'build'], { cwd: root, timeoutMs: TSC_TIMEOUT_MS });
    if (build.code !== 0) throw new Error(`npm run build failed:\n${build.output}`);
    log(`build in ${seconds(build.ms)}`);
  }
  // compat/.work is git-ignored: a fresh clone has none.
  await mkdir(work, { recursive: true });
  // Built above (or by the caller): not again by `prepack`.
  const pack = await npm(['pack', '--json', '--ignore-scripts', '--pack-destination', work], {
    cwd: root,
    timeoutMs: 60_000,
  });
  if (pack.code !== 0) throw new Error(`npm pack failed:\n${pack.output}`);
  const { filename } = JSON.parse(pack.stdout)[0];
  const tarball = path.join(work, filename);
  log(`packed ${path.relative(root, tarball)}`);
  return tarball;
}

function report(results, totalMs) {
  process.stdout.write('\n');
  for (const { app, steps, failed, versions, checks } of results) {
    const timing = Object.entries(steps)
      .map(([step, ms]) => `${step} ${seconds(ms)}`)
      .join(', ');
    const shown = Object.entries(versions)
      .map(([name, version]) => `${name}@${version}`)
      .join(' ');
    process.stdout.write(`${failed ? 'FAIL' : 'ok  '} ${app.name} (${timing})\n`);
    if (shown) process.stdout.write(`     ${shown}\n`);
    for (const check of checks) process.stdout.write(`     ${check}\n`);
    if (failed) {
      const tail = failed.output.trim().split('\n').slice(-40).join('\n     ');
      process.stdout.write(`     ${failed.step} failed; last lines:\n     ${tail}\n`);
    }
  }
  const failures = results.filter((result) => result.failed).length;
  process.stdout.write(
    `\ncompat: ${results.length - failures} apps passed, ${failures} failed in ${seconds(totalMs)}\n`,
  );
}

main().then(
  (passed) => {
    process.exitCode = passed ? 0 : 1;
  },
  (error) => {
    process.stderr.write(`[compat] ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
