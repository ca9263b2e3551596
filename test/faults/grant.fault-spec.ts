import { startFaultServer, type FaultServer } from '../support/fault-server';
import { runLibraryMutant } from './harness/library-mutant';
import { formatSummaryTable, runScenarioRow, type ScenarioRow } from './harness/summary-table';
import { grantGranteeKilled, grantHeadKilled } from './scenarios/grant-killed';
import { grantLostWithdrawal } from './scenarios/grant-lost-withdrawal';
import { grantMutants } from './scenarios/grant-mutants';
import { grantGranteePaused } from './scenarios/grant-paused';
import { grantStreamFaults } from './scenarios/grant-stream-faults';
import { makeModesMutant, removeModesMutant } from './scenarios/modes-run';
import type { GrantScenario } from './scenarios/grant-run';

jest.setTimeout(180_000);

const scenarios: GrantScenario[] = [
  grantHeadKilled,
  grantGranteeKilled,
  grantGranteePaused,
  grantStreamFaults,
  grantLostWithdrawal,
];

describe('direct grant under faults (several OS processes, one server)', () => {
  let server: FaultServer;
  /** The library under test, copied when the file starts: edits made meanwhile stay out. */
  let snapshot: string;
  const rows: ScenarioRow[] = [];

  beforeAll(async () => {
    snapshot = makeModesMutant('grant-under-test', []);
    server = await startFaultServer();
  });

  afterAll(async () => {
    process.stdout.write(
      `\nDirect grant on ${server?.kind ?? 'no'} server\n${formatSummaryTable(rows)}\n\n`,
    );
    await server?.stop();
    if (snapshot) removeModesMutant(snapshot);
  });

  describe('the library under test', () => {
    it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
      expect(
        await runScenarioRow(scenario.name, () => scenario.run(server, snapshot), rows),
      ).toEqual([]);
    });
  });
  describe('mutants: broken copies of the library are caught', () => {
    it.each(grantMutants.map((m) => [m.name, m] as const))('%s', async (_name, mutant) => {
      const caught = await runLibraryMutant(server, 'grant', mutant, rows);
      expect(caught.length).toBeGreaterThan(0);
    });
  });
});
