// `npm run test:spec -- [--dir <folder>] [--filter <text>] [--no-skips] [--standalone]`: runs
// every spec test file under the folder against the fixture's server, and prints one line per
// file, the failures, and `N passed, N failed, N skipped` (exit code 1 when any failed).
import { resolve } from 'node:path';
import { describe } from './matching/match';
import { describeServer } from './server-info';
import type { RunContext } from './run-context';
import { collectSpecCases, groupByFile, type SpecCase } from './spec-cases';
import { defaultSpecDir, specDirExists } from './spec-files';
import { startSpecServer } from './spec-server';
import { unusedSkips } from './skips';

interface CliOptions {
  dir: string;
  filter?: string;
  applySkipList: boolean;
  standalone: boolean;
}

function parseArgs(argv: string[]): CliOptions {
  const options: CliOptions = { dir: defaultSpecDir(), applySkipList: true, standalone: false };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--dir') options.dir = resolve(argv[++i]);
    else if (argv[i] === '--filter') options.filter = argv[++i];
    else if (argv[i] === '--no-skips') options.applySkipList = false;
    else if (argv[i] === '--standalone') options.standalone = true;
    else throw new Error(`Unknown argument ${argv[i]} (--dir, --filter, --no-skips, --standalone)`);
  }
  return options;
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  if (!specDirExists(options.dir)) {
    console.log(`MongoDB specification tests not found at ${options.dir}; nothing to run`);
    console.log('0 passed, 0 failed, 0 skipped');
    return 0;
  }
  const server = await startSpecServer({ standalone: options.standalone });
  const totals: Counts = { passed: 0, failed: 0, skipped: 0 };
  try {
    console.log(`Spec tests from ${options.dir} against ${describeServer(server.ctx.server)}`);
    const all = collectSpecCases(options.dir, server.ctx.server, options);
    const cases = all.filter(
      (c) => !options.filter || `${c.file} ${c.description}`.includes(options.filter),
    );
    for (const [file, fileCases] of groupByFile(cases)) {
      const { counts, lines } = await runFile(fileCases, server.ctx);
      const status = counts.failed ? 'FAIL' : counts.passed ? 'PASS' : 'SKIP';
      console.log(`${status}  ${file}: ${summary(counts)}`);
      const details = lines.filter((l) => l.startsWith('    FAIL') || process.env.SPEC_VERBOSE);
      if (details.length) console.log(details.join('\n'));
      totals.passed += counts.passed;
      totals.failed += counts.failed;
      totals.skipped += counts.skipped;
    }
    // Only a run over the whole default folder can tell that an entry matches nothing.
    const wholeFolder = !options.filter && options.dir === defaultSpecDir();
    if (wholeFolder && server.ctx.server.kind === 'offline') {
      for (const stale of unusedSkips(all))
        console.log(`warning: skip entry matches no test: ${stale.file} / ${stale.test}`);
    }
  } finally {
    await server.stop();
  }
  console.log(summary(totals));
  return totals.failed > 0 ? 1 : 0;
}

type Counts = { passed: number; failed: number; skipped: number };

/** Runs one file's cases in order; `lines` has a line per skip and per failure. */
async function runFile(cases: SpecCase[], ctx: RunContext) {
  const counts: Counts = { passed: 0, failed: 0, skipped: 0 };
  const lines: string[] = [];
  for (const c of cases) {
    if (c.skipReason) {
      counts.skipped++;
      lines.push(`    skip  ${c.description} (${c.skipReason})`);
      continue;
    }
    try {
      await c.run(ctx);
      counts.passed++;
    } catch (error) {
      counts.failed++;
      const message = error instanceof Error ? error.message : describe(error);
      lines.push(`    FAIL  ${c.description}\n${indent(message, 10)}`);
    }
  }
  return { counts, lines };
}

function summary(counts: Counts) {
  return `${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`;
}

function indent(text: string, spaces: number) {
  return text
    .split('\n')
    .map((line) => ' '.repeat(spaces) + line)
    .join('\n');
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(`spec runner failed: ${error instanceof Error ? error.stack : String(error)}`);
    process.exit(2);
  },
);
