// `npm run bench`: the one entry point of the benchmarks. npm compiles them to .bench-build/
// first (tsconfig.bench.json) and runs them with plain node, so that no process pays ts-node's
// compile time and memory during a measurement.
//
//   npm run bench                                the main suite, the one BENCHMARKS.md reports
//   npm run bench -- --suite=modes               another suite (--suite=modes,contention: both)
//   BENCH_SUITES=modes,contention npm run bench  the same from the environment (--suite wins)
//   npm run bench -- --suite=all                 every suite, in the order of `suites` below
//   npm run bench -- --help                      the suites and what each writes
//
// Each suite runs against a server of its own, started for it and stopped after it: MONGODB_URI
// if set, else the offline MongoDB test server in its own process. Each suite's file names the
// BENCH_* variables that shorten it. The run exits with 1 if a suite failed or found a problem.
import { startBenchServer } from './support/bench-process';
import type { SuiteRun } from './support/suite';
import { runContentionSuite } from './suites/contention';
import { runDocumentsSuite } from './suites/documents';
import { runMainSuite } from './suites/main';
import { runModesSuite } from './suites/modes';
import { runMongoSuite } from './suites/mongo';

const suites = {
  main: {
    about: 'hand-off, throughput, shape matrix, command sizes, scale, HTTP: latest.md/json, SVG',
    run: runMainSuite,
  },
  contention: { about: "the main suite's shape matrix alone: printed", run: runContentionSuite },
  modes: {
    about: 'shared, exclusive and semaphore locks under load: modes-latest.md/json',
    run: runModesSuite,
  },
  documents: {
    about: 'document locks against the lock collection: document-lock.json',
    run: runDocumentsSuite,
  },
  mongo: { about: 'the MongoDB server under the library: mongo-latest.md', run: runMongoSuite },
} satisfies Record<string, { about: string; run: SuiteRun }>;
type SuiteName = keyof typeof suites;
const suiteNames = Object.keys(suites) as SuiteName[];

const usage = [
  'usage: npm run bench [-- --suite=NAME[,NAME...]]   (or BENCH_SUITES=NAME,...; default main)',
  ...suiteNames.map((name) => `  ${name.padEnd(11)} ${suites[name].about}`),
  `  ${'all'.padEnd(11)} every suite above, in this order`,
  'Results go to bench/results/.',
].join('\n');

class UsageError extends Error {}

/** The suites asked for by `--suite` (else BENCH_SUITES, else main), each once, in order. */
function selectedSuites(args: string[]): SuiteName[] {
  let selection = process.env.BENCH_SUITES;
  for (let i = 0; i < args.length; i++) {
    const match = /^--suite(?:=(.*))?$/.exec(args[i]);
    if (!match) throw new UsageError(`unknown argument ${JSON.stringify(args[i])}`);
    selection = match[1] ?? args[++i];
    if (selection === undefined) throw new UsageError('--suite needs a name');
  }
  const names = (selection ?? 'main')
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean)
    .flatMap((name) => (name === 'all' ? suiteNames : [name]));
  for (const name of names) {
    if (!(name in suites)) throw new UsageError(`no suite named ${JSON.stringify(name)}`);
  }
  return [...new Set(names as SuiteName[])];
}

/** The command recorded in a suite's results: the shortest one that runs it again. */
const commandFor = (name: SuiteName) =>
  name === 'main' ? 'npm run bench' : `npm run bench -- --suite=${name}`;

const describeError = (error: unknown) =>
  error instanceof Error ? (error.stack ?? error.message) : String(error);

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(`${usage}\n`);
    return;
  }
  let names: SuiteName[];
  try {
    names = selectedSuites(args);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`${error.message}\n${usage}\n`);
    process.exitCode = 2;
    return;
  }
  const failed: string[] = [];
  for (const name of names) {
    const log = (message: string) => process.stderr.write(`[bench:${name}] ${message}\n`);
    const startedAt = new Date();
    try {
      const server = await startBenchServer();
      log(`server ${server.kind} at ${server.uri}${server.pid ? ` (pid ${server.pid})` : ''}`);
      try {
        const command = commandFor(name);
        const problems = await suites[name].run({ server, command, startedAt, log });
        if (problems.length) failed.push(name);
      } finally {
        await server.stop();
      }
    } catch (error) {
      log(describeError(error));
      failed.push(name);
    }
    log(`finished in ${Math.round((Date.now() - startedAt.getTime()) / 1000)} s`);
  }
  if (failed.length) {
    process.stderr.write(`[bench] failed or found problems: ${failed.join(', ')}\n`);
    // A failed suite may have left clients or processes behind that would keep node running.
    process.exit(1);
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${describeError(error)}\n`);
  process.exit(1);
});
