import { startFaultServer, type FaultServer } from '../support/fault-server';
import { formatSummaryTable } from './harness/summary-table';
import { documentCommit } from './scenarios/document-commit';

// Document locks under SIGSTOP and SIGKILL: several processes lock one document and commit
// `$inc` to it, holders are frozen past their lease and some are killed. The counter must
// equal the commits that resolved, in grant order, and no late commit may land
// (scenarios/document-commit.ts). The mutation test runs it on libraries whose commit filter
// is broken (mutation.fault-spec.ts).
jest.setTimeout(120_000);

describe('document commit under faults (several OS processes, one server)', () => {
  let server: FaultServer;

  beforeAll(async () => {
    server = await startFaultServer();
  });

  afterAll(async () => {
    await server?.stop();
  });

  it.each([documentCommit])('$name', async (scenario) => {
    const startedAt = Date.now();
    const outcome = await scenario.run(server);
    const row = {
      scenario: scenario.name,
      operations: outcome.operations,
      violations: outcome.violations.length,
      timeMs: Date.now() - startedAt,
      notes: outcome.notes,
    };
    process.stdout.write(`\nOn ${server.kind} server\n${formatSummaryTable([row])}\n\n`);
    expect(outcome.violations).toEqual([]);
  });
});
