import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { startFaultServer, type FaultServer } from '../support/fault-server';
import { runContentionScenario } from './scenarios/contention';
import { runDocumentCommit } from './scenarios/document-commit';
import { runEarlyGrantProbe } from './scenarios/early-grant-probe';

// The checker is only trusted once a deliberately broken library makes the suite fail
// (ARCHITECTURE.md §8). This copies the library, breaks the one expression that decides
// whether a lease has ended so that it ends 300 ms early, runs the early-grant probe with
// every worker on the copy, and expects the checker to catch it. The suite runs the same
// probe on the real library and expects nothing (fault-suite.fault-spec.ts).
jest.setTimeout(180_000);

const repoRoot = path.resolve(__dirname, '../..');
/** Inside the repository, so the copy resolves `node_modules`; git-, lint- and format-ignored. */
const copiesRoot = path.join(repoRoot, '.fault-lib-copies');
/** The library under test: the repository's, or the one the whole run uses (FAULT_LIB_DIR). */
const sourceLib = path.resolve(process.env.FAULT_LIB_DIR ?? path.join(repoRoot, 'lib'));

/**
 * Copies the library to `target`, with leases counted as ended 300 ms before they do: by the
 * writes, which drop dead entries from the line, and by the reads of a line (a poll's place).
 */
function makeEarlyGrantMutant(target: string): void {
  makeMutant(
    target,
    'store/line/line-pipelines.ts',
    "  $filter: { input: { $ifNull: ['$line', []] }, cond: { $gt: ['$$this.e', NOW] } },",
    "  $filter: { input: { $ifNull: ['$line', []] }, cond: { $gt: ['$$this.e', { $add: [NOW, 300] }] } },",
  );
  patchCopy(
    target,
    'store/line/line-document.ts',
    'return (line ?? []).filter((entry) => entry.e.getTime() > now.getTime());',
    'return (line ?? []).filter((entry) => entry.e.getTime() > now.getTime() + 300);',
  );
}

/** Copies the library to `target`, with `anchor` in `file` replaced by `replacement` (exactly once). */
function makeMutant(
  target: string,
  patchedFile: string,
  anchor: string,
  replacement: string,
): void {
  rmSync(target, { recursive: true, force: true });
  mkdirSync(path.dirname(target), { recursive: true });
  cpSync(sourceLib, target, {
    recursive: true,
    filter: (file) => !file.endsWith('.spec.ts'),
  });
  patchCopy(target, patchedFile, anchor, replacement);
}

/** In the copy at `target`, `anchor` in `patchedFile` replaced by `replacement` (exactly once). */
function patchCopy(target: string, patchedFile: string, anchor: string, replacement: string): void {
  const file = path.join(target, patchedFile);
  const source = readFileSync(file, 'utf8');
  const found = source.split(anchor).length - 1;
  if (found !== 1) {
    throw new Error(
      `Mutation test: the anchor ${anchor} occurs ${found} times in ${patchedFile}, not once. ` +
        'The lease-end check moved or changed: update the mutation, do not drop the test.',
    );
  }
  // A function, not a string: `$$` in a replacement string would collapse to `$`.
  const mutated = source.replace(anchor, () => replacement);
  if (!mutated.includes(replacement)) throw new Error('Mutation test: the patch did not apply');
  writeFileSync(file, mutated);
}

/**
 * In the enclosing `describe`: a fault server for its tests (`server()`), and where its mutant
 * copy of the library goes (`dir`, removed afterwards unless FAULT_KEEP_MUTANT is set).
 */
function mutantFixture(name: string): { server: () => FaultServer; dir: string } {
  let server: FaultServer | undefined;
  const dir = path.join(copiesRoot, `${name}-${process.pid}`, 'lib');
  beforeAll(async () => {
    server = await startFaultServer();
  });
  afterAll(async () => {
    await server?.stop();
    if (!process.env.FAULT_KEEP_MUTANT) rmSync(path.dirname(dir), { recursive: true, force: true });
  });
  return {
    server: () => {
      if (!server) throw new Error('the fault server did not start');
      return server;
    },
    dir,
  };
}

describe('mutation test: a library granting locks 300 ms before the lease ends', () => {
  const fixture = mutantFixture('early-grant');

  it('is caught by the history checker (overlap or told-late)', async () => {
    const server = fixture.server();
    const mutantDir = fixture.dir;
    makeEarlyGrantMutant(mutantDir);
    const outcome = await runEarlyGrantProbe(server, mutantDir);
    const caught = outcome.violations.filter((v) => v.kind === 'overlap' || v.kind === 'told-late');
    const other = outcome.violations.filter((v) => !caught.includes(v));
    process.stdout.write(
      `\nMutation test (lease ends 300 ms early, ${server.kind} server): ` +
        `${outcome.operations} sections, ${outcome.notes ?? ''}\n` +
        caught
          .slice(0, 5)
          .map((v) => `  ${v.kind} ${v.key}: ${v.detail}\n`)
          .join('') +
        '\n',
    );
    // The probe must have run properly (no worker errors): only the checker's verdict differs.
    expect(other).toEqual([]);
    expect(caught.length).toBeGreaterThan(0);
  });
});

/**
 * Document commits that land without proving the lock is still ours: `writeWhileHeld`'s
 * filter loses its check that the line's first live entry is ours (owner and lease). The
 * document-commit scenario (scenarios/document-commit.ts) must catch it: a holder frozen past
 * its lease and thawed commits late, on its own expired lease or over the next holder's.
 */
const documentMutants = [
  {
    name: 'no check of the line',
    file: 'store/documents/document-writes.ts',
    anchor: 'const held = { $expr: target.lock.ownedBy(owner) };',
    replacement: 'const held = {}; // mutant: no check of the line',
  },
];

describe.each(documentMutants)(
  'mutation test: document commit with $name in its filter',
  ({ name, file, anchor: documentAnchor, replacement }) => {
    const fixture = mutantFixture(`document-${name.replace(/\W+/g, '-')}`);

    it('is caught by the document-commit scenario', async () => {
      const server = fixture.server();
      const mutantDir = fixture.dir;
      makeMutant(mutantDir, file, documentAnchor, replacement);
      // The late commit that landed is what must be caught; the rest follows from it. Whether
      // a run shows it depends on its random freezes (without the owner check, a late commit
      // lands only if another holder re-locked the document meanwhile): up to 3 runs.
      let lateLanded: unknown[] = [];
      for (let run = 1; run <= 3 && lateLanded.length === 0; run++) {
        const outcome = await runDocumentCommit(server, {
          libDir: mutantDir,
          durationMs: 10_000,
        });
        process.stdout.write(
          `\nMutation test (document commit, ${name}, ${server.kind} server, run ${run}): ` +
            `${outcome.operations} sections, ${outcome.notes ?? ''}\n` +
            outcome.violations
              .slice(0, 6)
              .map((v) => `  ${v.kind}: ${v.detail}\n`)
              .join('') +
            '\n',
        );
        lateLanded = outcome.violations.filter((v) => v.detail.includes('frozen past its lease'));
      }
      expect(lateLanded.length).toBeGreaterThan(0);
    });
  },
);

/**
 * A library that keeps a lock for nobody: `release()` answers every twentieth call without
 * releasing, so the handle stays held (and renewed, for the holds that renew) while its caller
 * has moved on. Closing the service at the end would give such a lock back unseen, so the
 * harness asks each service first how many locks it holds beyond its callers' (`endWork`): the
 * contention scenario must report a leaked lock.
 */
describe('mutation test: a release that keeps the lock for nobody', () => {
  const fixture = mutantFixture('forgotten-release');

  it('is caught by the contention scenario (leaked-lock)', async () => {
    const server = fixture.server();
    const mutantDir = fixture.dir;
    makeMutant(
      mutantDir,
      'lock-handle.ts',
      '  release(): Promise<void> {\n',
      '  release(): Promise<void> {\n' +
        '    // mutant: every twentieth release is forgotten\n' +
        '    const calls = globalThis as { releaseCalls?: number };\n' +
        '    calls.releaseCalls = (calls.releaseCalls ?? 0) + 1;\n' +
        '    if (calls.releaseCalls % 20 === 0) return Promise.resolve();\n',
    );
    const outcome = await runContentionScenario(server, { libDir: mutantDir, durationMs: 6_000 });
    const leaked = outcome.violations.filter((v) => v.kind === 'leaked-lock');
    process.stdout.write(
      `\nMutation test (a release kept for nobody, ${server.kind} server): ` +
        `${outcome.operations} sections, ${outcome.notes ?? ''}\n` +
        leaked
          .slice(0, 4)
          .map((v) => `  ${v.kind}: ${v.detail}\n`)
          .join('') +
        '\n',
    );
    expect(leaked.length).toBeGreaterThan(0);
  });
});
