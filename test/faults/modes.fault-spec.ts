import { startFaultServer, type FaultServer } from '../support/fault-server';
import { runLibraryMutant } from './harness/library-mutant';
import { formatSummaryTable, runScenarioRow, type ScenarioRow } from './harness/summary-table';
import { modesMutants } from './scenarios/modes-mutants';
import { lineTransaction } from './scenarios/modes-transaction';
import type { Scenario } from './scenarios/scenario';

// Shared/exclusive locks and semaphores under faults: several OS processes per scenario
// (test/support/fault-worker.ts), one server, SIGKILL and SIGSTOP of holders, releaseScope from
// another process, transactions whose lease is lost mid-way. history/modes-checker.ts judges
// every history. Then the same scenarios, shortened, on deliberately broken copies of the
// library: each must be caught. See README.md, "Lock modes".
jest.setTimeout(180_000);

const scenarios: Scenario[] = [lineTransaction];

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
      expect(await runScenarioRow(scenario.name, () => scenario.run(server), rows)).toEqual([]);
    });
  });

  describe('mutants: broken copies of the library are caught', () => {
    it.each(modesMutants.map((m) => [m.name, m] as const))('%s', async (_name, mutant) => {
      const caught = await runLibraryMutant(server, 'modes', mutant, rows);
      expect(caught.length).toBeGreaterThan(0);
    });
  });
});
