import { startFaultServer, type FaultServer } from '../support/fault-server';
import { formatSummaryTable } from './harness/summary-table';
import { serverRestart } from './scenarios/server-restart';

// Its own server: the scenario kills it five times, which no other scenario should share.
jest.setTimeout(300_000);

describe('server restart (its own offline server, killed and restarted)', () => {
  let server: FaultServer;

  beforeAll(async () => {
    server = await startFaultServer({ restartable: true });
  });

  afterAll(async () => {
    await server?.stop();
  });

  it(serverRestart.name, async () => {
    const startedAt = Date.now();
    const outcome = await serverRestart.run(server);
    process.stdout.write(
      `\n${formatSummaryTable([
        {
          scenario: serverRestart.name,
          operations: outcome.operations,
          violations: outcome.violations.length,
          timeMs: Date.now() - startedAt,
          notes: outcome.notes,
        },
      ])}\n\n`,
    );
    expect(outcome.violations).toEqual([]);
  });
});
