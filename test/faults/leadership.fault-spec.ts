import { leaderKey } from '../../lib/leadership/leader-key';
import { sharedClockMs, type IpcChild } from '@nestjs-mongo-lock/process-harness';
import type { LeadMutant, LeadTermReport, LeadershipWorkerOps } from '../support/fault-leadership';
import type { WorkerEvent, WorkerOps } from '../support/fault-protocol';
import { startFaultServer, type FaultServer } from '../support/fault-server';
import { FaultRun, type StartedWorker } from './harness/fault-run';
import { formatSummaryTable, runScenarioRow, type ScenarioRow } from './harness/summary-table';
import type { SectionRecord, Violation, ViolationKind } from './history/history';
import { Expectations, sleep, type Scenario, type ScenarioOutcome } from './scenarios/scenario';

// Leadership (`LockService.leadership(name).terms$`) across OS processes, under faults: the
// leader SIGKILLed, SIGSTOPped past its lease and thawed, the server stepping down, the leader's
// renewals failing. Each process runs `terms$` (worker op `lead`, test/support/fault-leadership.ts)
// and reports every term as a section of the term's lock key, so that the history checker
// judges terms by its rule: a term's protected interval runs from its election to the earlier
// of its end and its own local lease deadline (when its signal must abort); no two overlap,
// fences rise in election order, a term worked on past a successor's election was told first.
// Then two broken leaders (worker flags, not `lib`) that the same scenarios must catch.
jest.setTimeout(120_000);

type LeadProcess = IpcChild<WorkerOps & LeadershipWorkerOps, WorkerEvent>;

const lead = (worker: StartedWorker) => worker.process as unknown as LeadProcess;

/** Short leases: a scenario is a few of them. */
const ttlMs = 1000;
const tickMs = 100;
/** The promise: a new leader within the lease plus one second of the old leader's death. */
const takeoverBoundMs = ttlMs + 1000;

interface LeadRun {
  run: FaultRun;
  name: string;
  key: string;
  workers: StartedWorker[];
  expect: Expectations;
}

async function startLeadRun(
  server: FaultServer,
  scenario: string,
  count: number,
  options: { ttlMs?: number; mutant?: LeadMutant } = {},
): Promise<LeadRun> {
  const run = new FaultRun(server, `lead_${scenario}`);
  const name = `${scenario}-leader`;
  const key = leaderKey(name);
  const workers = await run.spawn(
    Array.from({ length: count }, (_, i) => ({ label: `${scenario}${i}` })),
  );
  // One after the other: candidates are served in the order they stood.
  for (const worker of workers) {
    await lead(worker).call('lead', {
      name,
      key,
      ttlMs: options.ttlMs ?? ttlMs,
      tickMs,
      mutant: options.mutant,
    });
  }
  return { run, name, key, workers, expect: new Expectations() };
}

/** The terms on now, by the history: elected, not ended, leader not killed. */
function openTerms(lr: LeadRun): SectionRecord[] {
  const dead = new Set(lr.run.history.deaths.map((d) => d.holder));
  return lr.run.history.sections.filter(
    (s) => s.key === lr.key && s.outcome === 'open' && !dead.has(s.holder),
  );
}

/**
 * Waits until a term is on that `accept` accepts (any, by default), up to `ms`; returns it
 * with its worker, or `undefined`.
 */
async function waitForLeader(
  lr: LeadRun,
  ms: number,
  accept: (s: SectionRecord) => boolean = () => true,
): Promise<{ section: SectionRecord; worker: StartedWorker } | undefined> {
  const until = sharedClockMs() + ms;
  for (;;) {
    const section = openTerms(lr).find(accept);
    const worker = section && lr.workers.find((w) => w.holderId === section.holder);
    if (section && worker) return { section, worker };
    if (sharedClockMs() > until) return undefined;
    await sleep(10);
  }
}

/** The section of one term, once it has ended, up to `ms`. */
async function waitForEnd(
  lr: LeadRun,
  term: SectionRecord,
  ms: number,
): Promise<SectionRecord | undefined> {
  const until = sharedClockMs() + ms;
  for (;;) {
    const ended = lr.run.history.sections.find(
      (s) =>
        s.key === lr.key &&
        s.holder === term.holder &&
        s.fence === term.fence &&
        s.outcome !== 'open',
    );
    if (ended || sharedClockMs() > until) return ended;
    await sleep(10);
  }
}

async function termReport(
  worker: StartedWorker,
  name: string,
  fence: string,
): Promise<LeadTermReport | undefined> {
  const { terms } = await lead(worker).call('leadStatus', { name });
  return terms.find((t) => t.fence === fence);
}

/** Every live, running worker resigns and stops campaigning; then the checker. */
async function finish(lr: LeadRun, leaseMs: number): Promise<Violation[]> {
  const dead = new Set(lr.run.history.deaths.map((d) => d.holder));
  const live = lr.workers.filter((w) => !dead.has(w.holderId) && w.process.alive);
  const stopped = await Promise.all(live.map((w) => lead(w).call('stopLead', { name: lr.name })));
  const afterSignal = stopped.flatMap((s) => s.terms).reduce((n, t) => n + t.ticksAfterSignal, 0);
  lr.expect.that(
    afterSignal === 0,
    lr.key,
    `${afterSignal} tick(s) of protected work began after their term's signal aborted`,
  );
  return lr.run.check({ leaseMs }, lr.expect.violations);
}

function fenceOf(s: SectionRecord): bigint {
  return BigInt(s.fence);
}

/** SIGKILL of the leader, `rounds` times: a new leader within the lease plus one second. */
async function leaderKilled(server: FaultServer, rounds = 2): Promise<ScenarioOutcome> {
  const lr = await startLeadRun(server, 'kill', rounds + 1);
  const takeovers: number[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      const leader = await waitForLeader(lr, 5000);
      if (!leader) {
        lr.expect.that(false, lr.key, `round ${round}: nobody was elected within 5 s`);
        break;
      }
      // Some protected work and at least one renewal first.
      await sleep(ttlMs * 0.8);
      const diedAt = await lr.run.kill(leader.worker);
      const next = await waitForLeader(lr, takeoverBoundMs + 3000, (s) => s.start > diedAt);
      if (!next) {
        lr.expect.that(
          false,
          lr.key,
          `round ${round}: no leader within ${takeoverBoundMs + 3000} ms of the kill`,
        );
        break;
      }
      const takeoverMs = next.section.start - diedAt;
      takeovers.push(takeoverMs);
      lr.expect.that(
        takeoverMs <= takeoverBoundMs,
        lr.key,
        `round ${round}: the next leader was elected ${Math.round(takeoverMs)} ms after the ` +
          `leader's SIGKILL (lease ${ttlMs} ms, bound ${takeoverBoundMs} ms)`,
      );
      lr.expect.that(
        fenceOf(next.section) > fenceOf(leader.section),
        lr.key,
        `round ${round}: fence ${next.section.fence} after ${leader.section.fence}`,
      );
    }
    const violations = await finish(lr, ttlMs);
    return {
      operations: lr.run.history.sections.length,
      violations,
      notes: `new leader ${takeovers.map((t) => Math.round(t)).join(', ')} ms after SIGKILL`,
    };
  } finally {
    await lr.run.stop();
  }
}

/**
 * Protected work a thawed leader began after SIGCONT, per round, from the SIGSTOP scenario:
 * its own test (a finding against `lib/leadership`, see README) judges it, so that the
 * scenario's other promises are judged on their own.
 */
const workAfterThaw: string[] = [];
let pausedScenarioRan = false;

/**
 * The leader frozen (SIGSTOP) until 500 ms after its successor's election, then thawed
 * (SIGCONT), `rounds` times: the thawed leader's signal aborts at once (within 50 ms) and its
 * term ends lost; the successor's fence is higher; the checker. Whether the thawed leader did
 * protected work after SIGCONT goes to `thawWork` if given (else it is a violation).
 */
async function leaderPaused(
  server: FaultServer,
  options: { rounds?: number; mutant?: LeadMutant; thawWork?: string[] } = {},
): Promise<ScenarioOutcome> {
  const rounds = options.rounds ?? 2;
  const lr = await startLeadRun(server, 'pause', 3, { mutant: options.mutant });
  const notes: string[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      const leader = await waitForLeader(lr, 5000);
      if (!leader) {
        lr.expect.that(false, lr.key, `round ${round}: nobody was elected within 5 s`);
        break;
      }
      await sleep(ttlMs * 0.5);
      const pausedAt = lr.run.pause(leader.worker);
      const next = await waitForLeader(
        lr,
        ttlMs + 4000,
        (s) => s.holder !== leader.section.holder && s.start > pausedAt,
      );
      lr.expect.that(
        next !== undefined,
        lr.key,
        `round ${round}: no leader while the leader was frozen`,
      );
      await sleep(500);
      const resumedAt = lr.run.resume(leader.worker);
      const ended = await waitForEnd(lr, leader.section, 3000);
      // A moment of ticks after the thaw, had the leader gone on working.
      await sleep(3 * tickMs);
      const report = await termReport(leader.worker, lr.name, leader.section.fence);
      if (!ended || !report) {
        lr.expect.that(
          false,
          lr.key,
          `round ${round}: the thawed leader never reported its term's end`,
        );
        continue;
      }
      if (options.mutant !== 'ignore-signal') {
        lr.expect.that(
          ended.signalAt !== null && ended.signalAt - resumedAt <= 50,
          lr.key,
          `round ${round}: the thawed leader's signal aborted ` +
            `${ended.signalAt === null ? 'never' : `${Math.round(ended.signalAt - resumedAt)} ms after SIGCONT`}`,
        );
        lr.expect.that(
          ended.outcome === 'lost',
          lr.key,
          `round ${round}: term ended ${ended.outcome}`,
        );
      }
      const workAfter = report.tickTimes.filter((t) => t >= resumedAt).length;
      if (workAfter > 0) {
        const detail =
          `round ${round}: the thawed leader did ${workAfter} tick(s) of protected work after ` +
          `SIGCONT, its term.signal not yet aborted (${report.ticksPastDeadline} tick(s) began ` +
          `past its local deadline, handle.expiresAt; ${report.refusedWrites} write(s) refused ` +
          `by the fenced resource); the signal aborted ` +
          `${ended.signalAt === null ? 'never' : `${Math.round(ended.signalAt - resumedAt)} ms after SIGCONT`}`;
        if (options.thawWork) options.thawWork.push(detail);
        else lr.expect.that(false, lr.key, detail);
      }
      if (next) {
        lr.expect.that(
          fenceOf(next.section) > fenceOf(leader.section),
          lr.key,
          `round ${round}: fence ${next.section.fence} after ${leader.section.fence}`,
        );
        notes.push(
          `successor ${Math.round(next.section.start - pausedAt)} ms after SIGSTOP, ` +
            `told ${ended.signalAt === null ? 'never' : `${Math.round(ended.signalAt - resumedAt)} ms`} after SIGCONT`,
        );
      }
    }
    const violations = await finish(lr, ttlMs);
    return { operations: lr.run.history.sections.length, violations, notes: notes.join('; ') };
  } finally {
    await lr.run.stop();
  }
}

/** `replSetStepDown` while a leader renews and two candidates wait: a leader again after it. */
async function serverStepDown(server: FaultServer): Promise<ScenarioOutcome> {
  const stepDownSecs = 2;
  const leaseMs = 1500;
  const lr = await startLeadRun(server, 'stepdown', 3, { ttlMs: leaseMs });
  try {
    const leader = await waitForLeader(lr, 5000);
    lr.expect.that(leader !== undefined, lr.key, 'nobody was elected within 5 s');
    await sleep(500);
    await lr.run.admin.db('admin').command({ replSetStepDown: stepDownSecs, force: true });
    const steppedDownAt = sharedClockMs();
    await sleep(stepDownSecs * 1000);
    const boundMs = leaseMs + 2000;
    const after = await waitForLeader(lr, boundMs);
    lr.expect.that(
      after !== undefined,
      lr.key,
      `no leader within ${boundMs} ms of the step-down's end`,
    );
    // A little leading after it, then a hand-over by resignation.
    await sleep(leaseMs);
    const current = await waitForLeader(lr, boundMs);
    if (current) {
      await lead(current.worker).call('resignTerm', { name: lr.name });
      const next = await waitForLeader(lr, 2000, (s) => fenceOf(s) > fenceOf(current.section));
      lr.expect.that(next !== undefined, lr.key, 'no new leader within 2 s of a resignation');
    }
    const terms = lr.run.history.sections.filter((s) => s.key === lr.key);
    const lost = terms.filter((s) => s.outcome === 'lost').length;
    const violations = await finish(lr, leaseMs);
    return {
      operations: terms.length,
      violations,
      notes:
        `${terms.length} terms, ${lost} lost; leader again ` +
        `${after ? Math.round(after.section.start - steppedDownAt) : '-'} ms after replSetStepDown`,
    };
  } finally {
    await lr.run.stop();
  }
}

/**
 * The leader's renewals fail (`failCommand` on its `findAndModify` and `update`, by its
 * `appName`, ShutdownInProgress): its signal aborts at its own local deadline, before the next
 * leader is elected; the fail point stays on until then.
 */
async function renewalsFail(
  server: FaultServer,
  options: { mutant?: LeadMutant } = {},
): Promise<ScenarioOutcome> {
  const lr = await startLeadRun(server, 'renew', 3, { mutant: options.mutant });
  let note = '';
  try {
    const leader = await waitForLeader(lr, 5000);
    if (!leader) {
      lr.expect.that(false, lr.key, 'nobody was elected within 5 s');
    } else {
      await sleep(ttlMs * 0.5);
      const before = await lr.run.failPoint('alwaysOn', {
        failCommands: ['findAndModify', 'update'],
        errorCode: 91,
        appName: leader.worker.label,
      });
      const failingFrom = sharedClockMs();
      const next = await waitForLeader(lr, ttlMs + 4000, (s) => s.holder !== leader.section.holder);
      const fired = (await lr.run.failPoint('off')) - before;
      lr.expect.that(fired > 0, lr.key, "the fail point never fired on the leader's renewals");
      lr.expect.that(
        next !== undefined,
        lr.key,
        "no new leader after the leader's renewals failed",
      );
      const ended = await waitForEnd(lr, leader.section, 2000);
      if (options.mutant !== 'ignore-signal') {
        lr.expect.that(
          ended?.outcome === 'lost' && ended.signalAt !== null,
          lr.key,
          `the leader whose renewals failed was not told (${ended?.outcome ?? 'no end reported'})`,
        );
      }
      if (next && ended) {
        lr.expect.that(
          fenceOf(next.section) > fenceOf(leader.section),
          lr.key,
          `fence ${next.section.fence} after ${leader.section.fence}`,
        );
        note =
          `renewals failing (${fired} fired): leader told ` +
          `${ended.signalAt === null ? 'never' : `${Math.round(ended.signalAt - failingFrom)} ms`} ` +
          `after, successor ${Math.round(next.section.start - failingFrom)} ms after`;
      }
      await sleep(ttlMs);
    }
    const violations = await finish(lr, ttlMs);
    return { operations: lr.run.history.sections.length, violations, notes: note };
  } finally {
    await lr.run.stop();
  }
}

const scenarios: Scenario[] = [
  { name: 'leader SIGKILLed, twice', run: (server) => leaderKilled(server) },
  {
    name: 'leader SIGSTOPped past its lease, twice',
    run: (server) => {
      pausedScenarioRan = true;
      return leaderPaused(server, { thawWork: workAfterThaw });
    },
  },
  { name: 'server step-down', run: serverStepDown },
  { name: "leader's renewals fail", run: (server) => renewalsFail(server) },
];

/** Broken leaders (worker flags): the scenario must report a violation of these kinds. */
const mutants: { name: string; run: Scenario['run']; caughtAs: ViolationKind[] }[] = [
  {
    name: 'the leader ignores its signal and counts its term as on until it resigns (renewals fail)',
    run: (server) => renewalsFail(server, { mutant: 'ignore-signal' }),
    caughtAs: ['overlap'],
  },
  {
    name: 'a frozen leader records its term as running to its release, not its local deadline',
    run: (server) => leaderPaused(server, { rounds: 1, mutant: 'interval-to-release' }),
    caughtAs: ['overlap'],
  },
];

describe('leadership under faults (several OS processes, one server)', () => {
  let server: FaultServer;
  const rows: ScenarioRow[] = [];

  beforeAll(async () => {
    server = await startFaultServer();
  });

  afterAll(async () => {
    process.stdout.write(
      `\nLeadership faults on ${server?.kind ?? 'no'} server\n${formatSummaryTable(rows)}\n\n`,
    );
    await server?.stop();
  });

  it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
    expect(await runScenarioRow(scenario.name, () => scenario.run(server), rows)).toEqual([]);
  });

  // A thawed process runs its due timers in the order they were due, so the leader's work timer
  // (due before the freeze ended) runs before the lease keeper's deadline timer: reading the
  // signal must itself check the local deadline (MongoLockHandle.signal).
  it('a thawed leader finds its term.signal aborted before any protected work (SIGSTOP scenario)', () => {
    expect(pausedScenarioRan).toBe(true);
    expect(workAfterThaw).toEqual([]);
  });

  it.each(mutants.map((m) => [m.name, m] as const))('mutant: %s', async (_name, mutant) => {
    const startedAt = Date.now();
    const outcome = await mutant.run(server);
    const caught = outcome.violations.filter((v) => mutant.caughtAs.includes(v.kind));
    rows.push({
      scenario: `mutant: ${mutant.name}`,
      operations: outcome.operations,
      violations: outcome.violations.length,
      timeMs: Date.now() - startedAt,
      notes: `caught by ${caught.length} ${mutant.caughtAs.join('/')}; e.g. ${
        caught[0]?.detail.slice(0, 200) ?? '-'
      }`,
    });
    expect(caught.length).toBeGreaterThan(0);
  });
});
