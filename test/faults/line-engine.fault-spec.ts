import { startFaultServer, type FaultServer } from '../support/fault-server';
import { runLibraryMutant, type LibraryMutant } from './harness/library-mutant';
import { formatSummaryTable, type ScenarioRow } from './harness/summary-table';
import { lineContention, runLineContentionScenario } from './scenarios/line-contention';

// Engine v2 (lib/store/line, lib/line-acquirer.ts) under the history checker, before it is
// under LockService: the scenario must pass, and broken copies of it must be caught.
jest.setTimeout(180_000);

const mutants: LibraryMutant[] = [
  {
    name: 'the second entry of a mutex line is told it holds',
    patches: [
      {
        file: 'store/line/line-document.ts',
        anchor: "  if (live[0].m !== 's') return 1;",
        replacement: "  if (live[0].m !== 's') return Math.min(2, live.length); // mutant",
      },
    ],
    run: (server, libDir) => runLineContentionScenario(server, { libDir, durationMs: 5_000 }),
    caughtAs: ['overlap'],
  },
  {
    name: 'a change of a line wakes every waiter of its key as holder',
    patches: [
      {
        file: 'waiting/line-waiters.ts',
        anchor: '    for (const entry of holders) waiters.get(entry)?.();',
        replacement: '    for (const wake of [...waiters.values()]) wake(); // mutant',
      },
    ],
    run: (server, libDir) => runLineContentionScenario(server, { libDir, durationMs: 5_000 }),
    caughtAs: ['overlap'],
  },
];

describe('engine v2 under faults (several OS processes, one server)', () => {
  let server: FaultServer;
  const rows: ScenarioRow[] = [];

  beforeAll(async () => {
    server = await startFaultServer();
  });

  afterAll(async () => {
    process.stdout.write(
      `\nEngine v2 on ${server?.kind ?? 'no'} server\n${formatSummaryTable(rows)}\n\n`,
    );
    await server?.stop();
  });

  it(lineContention.name, async () => {
    const startedAt = Date.now();
    const outcome = await lineContention.run(server);
    rows.push({
      scenario: lineContention.name,
      operations: outcome.operations,
      violations: outcome.violations.length,
      timeMs: Date.now() - startedAt,
      notes: outcome.notes,
    });
    expect(outcome.violations).toEqual([]);
  });

  it.each(mutants.map((m) => [m.name, m] as const))('mutant: %s', async (_name, mutant) => {
    const caught = await runLibraryMutant(server, 'line', mutant, rows);
    expect(caught.length).toBeGreaterThan(0);
  });
});
