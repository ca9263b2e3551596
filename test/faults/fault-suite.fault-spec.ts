import { startFaultServer, type FaultServer } from '../support/fault-server';
import { runLibraryMutant, type LibraryMutant } from './harness/library-mutant';
import { formatSummaryTable, runScenarioRow, type ScenarioRow } from './harness/summary-table';
import { clockSkew } from './scenarios/clock-skew';
import { connectionFaults } from './scenarios/connection-faults';
import { contention, contentionWithoutLocalHandOff } from './scenarios/contention';
import { earlyGrantProbe } from './scenarios/early-grant-probe';
import { eventsStreamFailures } from './scenarios/events-stream-failures';
import { holderKilled } from './scenarios/holder-killed';
import { holderPaused } from './scenarios/holder-paused';
import {
  lineContention,
  lineContentionWithoutHandover,
  lineLoop,
  runLineContentionScenario,
} from './scenarios/line-contention';
import { lineModes, runLineModesScenario } from './scenarios/line-modes';
import { lineLostWithdrawal, runLineLostWithdrawal } from './scenarios/line-lost-withdrawal';
import { hostileHttp } from './scenarios/hostile-http';
import { networkFaults } from './scenarios/network-faults';
import { releaseAllHeld } from './scenarios/release-all-held';
import { repeatedFaults } from './scenarios/repeated-faults';
import { serverPaused } from './scenarios/server-paused';
import { shutdownInFlight } from './scenarios/shutdown-in-flight';
import { stepDown } from './scenarios/step-down';
import { writeConcernErrors } from './scenarios/write-concern-errors';
import type { Scenario } from './scenarios/scenario';

// Every scenario runs against one server in its own process, one scenario at a time (they are
// about timing: running them side by side on a 2-core machine would only add noise), and
// reports a row of the closing table. Any violation fails its test.
jest.setTimeout(180_000);

const scenarios: Scenario[] = [
  contention,
  contentionWithoutLocalHandOff,
  holderKilled,
  holderPaused,
  connectionFaults,
  stepDown,
  clockSkew,
  hostileHttp,
  earlyGrantProbe,
  eventsStreamFailures,
  serverPaused,
  shutdownInFlight,
  repeatedFaults,
  writeConcernErrors,
  releaseAllHeld,
  lineContention,
  lineContentionWithoutHandover,
  lineLoop,
  lineModes,
  lineLostWithdrawal,
];

/** One caller per process looping on one key, shortened (the kept entries' scenario). */
const loop = { keys: ['line:loop'], workers: 1, durationMs: 3_000 };

/** Broken copies of engine v2 its scenario must catch (see README: Engine v2). */
const lineEngineMutants: LibraryMutant[] = [
  {
    name: 'the second entry of a mutex line is told it holds',
    patches: [
      {
        file: 'store/line/line-document.ts',
        anchor: "  if (live[0].m !== 's') return 1;",
        replacement: "  if (live[0].m !== 's') return Math.min(2, live.length); // mutant",
      },
    ],
    run: (server, libDir) => runLineContentionScenario(server, { libDir, durationMs: 3_000 }),
    caughtAs: ['overlap'],
  },
  {
    name: 'a change of a line wakes every waiter of its key as holder',
    patches: [
      {
        file: 'waiting/line-waiters.ts',
        anchor: '    for (const { t, fence } of holders) waiters.get(t)?.add(fence, news);',
        replacement:
          '    for (const { fence } of holders) for (const each of waiters.values()) each.add(fence, news); // mutant',
      },
      {
        // Whatever entry the news names.
        file: 'waiting/line-waiters.ts',
        anchor: '        if (this.byFence?.has(fence)) resolve(this.byFence.get(fence));',
        replacement: '        if (this.byFence) resolve(undefined); // mutant',
      },
    ],
    run: (server, libDir) => runLineContentionScenario(server, { libDir, durationMs: 3_000 }),
    caughtAs: ['overlap'],
  },
  {
    name: 'a leave removes the first live entry, not its own (no owner check)',
    patches: [
      {
        file: 'store/line/line-pipelines.ts',
        anchor:
          "          cond: { $and: [{ $gt: ['$$this.e', NOW] }, { $not: [{ $in: ['$$this.t', '$$ts'] }] }] },",
        replacement:
          "          cond: { $and: [{ $gt: ['$$this.e', NOW] }, { $ne: ['$$this.t', { $arrayElemAt: [{ $map: { input: { $filter: { input: '$line', as: 'x', cond: { $gt: ['$$x.e', NOW] } } }, as: 'x', in: '$$x.t' } }, 0] }] }] }, // mutant",
      },
    ],
    // The leaver's leave, behind the holder, removes the holder's entry: its release is lost.
    run: (server, libDir) => runLineLostWithdrawal(server, libDir),
    caughtAs: ['scenario'],
  },
  {
    name: 'a waiter that gives up sends its leave once: a lost one is not retried',
    patches: [
      {
        file: 'line-leaves.ts',
        anchor: '          // No reply: try again.',
        replacement: '          return; // mutant',
      },
    ],
    // The leave is lost: the leaver's entry stays in line, and the waiter behind it waits.
    run: (server, libDir) => runLineLostWithdrawal(server, libDir, ['retried']),
    caughtAs: ['scenario'],
  },
  {
    name: 'an exclusive entry behind shared holders holds with them (the prefix ignores modes)',
    patches: [
      {
        file: 'store/line/line-document.ts',
        anchor: "  while (count < live.length && live[count].m === 's') count++;",
        replacement: '  while (count < live.length) count++; // mutant',
      },
    ],
    run: (server, libDir) => runLineModesScenario(server, { libDir, durationMs: 3_500 }),
    caughtAs: ['overlap'],
  },
  {
    name: "a semaphore's prefix counts entries, not permits (it ignores weights)",
    patches: [
      {
        file: 'store/line/line-document.ts',
        anchor: '      used += entry.w ?? 1;',
        replacement: '      used += 1; // mutant',
      },
    ],
    run: (server, libDir) => runLineModesScenario(server, { libDir, durationMs: 3_500 }),
    caughtAs: ['over-capacity'],
  },
  {
    name: 'a caller handed the entry within its process takes its predecessor’s fence',
    patches: [
      {
        file: 'line-handover.ts',
        anchor: '    const fence = hold.fence + 1n;',
        replacement: '    const fence = hold.fence; // mutant',
      },
    ],
    run: (server, libDir) => runLineContentionScenario(server, { libDir, durationMs: 3_000 }),
    caughtAs: ['fence-order'],
  },
  {
    name: 'a caller here takes over a kept entry with its predecessor’s fence',
    patches: [
      {
        file: 'line-handover.ts',
        anchor: '    return { ...hold, fence: hold.fence + 1n, leaseEnd: lease.end };',
        replacement: '    return { ...hold, fence: hold.fence, leaseEnd: lease.end }; // mutant',
      },
    ],
    run: (server, libDir) => runLineContentionScenario(server, { libDir, ...loop }),
    caughtAs: ['fence-order'],
  },
  {
    name: 'a kept entry taken over still leaves at the next turn',
    patches: [
      {
        file: 'line-handover.ts',
        anchor: '    clearImmediate(timer);\n    followers.kept = undefined;\n',
        replacement: '    // mutant: neither cleared nor forgotten\n',
      },
    ],
    run: (server, libDir) => runLineContentionScenario(server, { libDir, ...loop }),
    caughtAs: ['overlap'],
  },
  {
    name: 'no change event reaches a waiter (it wakes on its renewal timer only)',
    patches: [
      {
        file: 'store/line/line-events.ts',
        anchor:
          "      { operationType: 'update', 'updateDescription.updatedFields.lead': leads },\n" +
          "      { operationType: 'replace', 'fullDocument.lead': leads },",
        replacement: "      { operationType: 'none' }, // mutant",
      },
    ],
    run: (server, libDir) => runLineContentionScenario(server, { libDir, durationMs: 3_000 }),
    caughtAs: ['scenario'],
  },
];

describe('fault and correctness suite (several OS processes, one server)', () => {
  let server: FaultServer;
  const rows: ScenarioRow[] = [];

  beforeAll(async () => {
    server = await startFaultServer();
  });

  afterAll(async () => {
    process.stdout.write(
      `\nFault suite on ${server?.kind ?? 'no'} server\n${formatSummaryTable(rows)}\n\n`,
    );
    await server?.stop();
  });

  it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
    expect(await runScenarioRow(scenario.name, () => scenario.run(server), rows)).toEqual([]);
  });

  it(networkFaults.name, async () => {
    expect(await runScenarioRow(networkFaults.name, () => networkFaults.run(server), rows)).toEqual(
      [],
    );
  });

  it.each(lineEngineMutants.map((m) => [m.name, m] as const))(
    'engine v2 mutant: %s',
    async (_name, mutant) => {
      const caught = await runLibraryMutant(server, 'line', mutant, rows);
      expect(caught.length).toBeGreaterThan(0);
    },
  );
});
