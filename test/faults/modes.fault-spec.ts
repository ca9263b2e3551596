import { startFaultServer, type FaultServer } from '../support/fault-server';
import { formatSummaryTable, type ScenarioRow } from './harness/summary-table';
import { modesMutants } from './scenarios/modes-mutants';
import { modesReadersWriters } from './scenarios/modes-readers-writers';
import { modesReleaseScope } from './scenarios/modes-release-scope';
import { makeModesMutant, removeModesMutant } from './scenarios/modes-run';
import { modesSemaphore } from './scenarios/modes-semaphore';
import { modesTransaction } from './scenarios/modes-transaction';
import type { Scenario } from './scenarios/scenario';

// Shared/exclusive locks and semaphores under faults: several OS processes per scenario
// (test/support/fault-worker.ts), one server, SIGKILL and SIGSTOP of holders, releaseScope from
// another process, transactions whose lease is lost mid-way. history/modes-checker.ts judges
// every history. Then the same scenarios, shortened, on deliberately broken copies of the
// library: each must be caught. See README.md, "Lock modes".
jest.setTimeout(180_000);

const scenarios: Scenario[] = [
  modesReadersWriters,
  modesSemaphore,
  modesReleaseScope,
  modesTransaction,
];

describe('lock modes under faults (several OS processes, one server)', () => {
  let server: FaultServer;
  const rows: ScenarioRow[] = [];

  beforeAll(async () => {
    server = await startFaultServer();
  });

  afterAll(async () => {
    process.stdout.write(
      `\nLock modes on ${server?.kind ?? 'no'} server\n${formatSummaryTable(rows)}\n\n`,
    );
    await server?.stop();
  });

  describe('the library under test', () => {
    it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
      const startedAt = Date.now();
      const outcome = await scenario.run(server);
      rows.push({
        scenario: scenario.name,
        operations: outcome.operations,
        violations: outcome.violations.length,
        timeMs: Date.now() - startedAt,
        notes: outcome.notes,
      });
      expect(outcome.violations).toEqual([]);
    });
  });

  describe('mutants: broken copies of the library are caught', () => {
    it.each(modesMutants.map((m) => [m.name, m] as const))('%s', async (name, mutant) => {
      const startedAt = Date.now();
      const libDir = makeModesMutant(`modes-${name.replace(/\W+/g, '-')}`, mutant.patches);
      try {
        const outcome = await mutant.run(server, libDir);
        const caught = outcome.violations.filter(
          (v) => mutant.caughtAs.includes(v.kind) && (mutant.accept?.(v) ?? true),
        );
        rows.push({
          scenario: `mutant: ${name}`,
          operations: outcome.operations,
          violations: outcome.violations.length,
          timeMs: Date.now() - startedAt,
          notes: `caught by ${caught.length} ${mutant.caughtAs.join('/')}; e.g. ${
            caught[0]?.detail.slice(0, 160) ?? '-'
          }`,
        });
        expect(caught.length).toBeGreaterThan(0);
      } finally {
        removeModesMutant(libDir);
      }
    });
  });
});
