import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { RecordedEvents, RecordedLockEvent } from '../../support/fault-protocol';
import { FaultRun, type StartedWorker } from '../harness/fault-run';
import type { SectionRecord } from '../history/history';
import { orphanBoundMs } from '../history/orphans';
import { Expectations, sleep, type Scenario } from './scenario';

/** The waiter's module option: its change feed counts a getMore unanswered 1 s + this as failed. */
const operationTimeoutMs = 1000;
/**
 * The waiter's safety poll, out of the way (the default is 5 s). Its waiting entry renews
 * itself a third into its 5 s lease, so the wake bound alone does not tell the change feed's
 * recovery from a renewal; the events$ checks below do.
 */
const safetyPollIntervalMs = 30_000;
/** How long the getMore fail point stays on (`alwaysOn`). */
const failingMs = 2000;
/** After the fail point is on: the waiter subscribes to events$ then, and the holder releases. */
const subscribeAfterMs = 1000;
const releaseAfterMs = 1200;
/**
 * The waiter must get the key this soon after the fail point is off: well under the 5 s
 * safety poll, so only the change feed's own recovery can meet it.
 */
const wakeBoundMs = 2500;
/** How long to wait for the waiter's own acquisition to come through events$. */
const eventWaitMs = 3000;

interface GetMoreFault {
  name: string;
  data: (appName: string) => Record<string, unknown>;
}

const getMoreFaults: GetMoreFault[] = [
  {
    // The driver resumes the stream by itself, again and again, while the fail point is on.
    name: 'resumable',
    data: (appName) => ({
      failCommands: ['getMore'],
      errorCode: 91,
      errorLabels: ['ResumableChangeStreamError'],
      appName,
    }),
  },
  {
    // The driver gives up on the stream: the library's change feed must reopen it.
    name: 'non-resumable',
    data: (appName) => ({ failCommands: ['getMore'], errorCode: 2, errorLabels: [], appName }),
  },
];

/**
 * `events$` through change-stream failures. Worker A holds a key; worker B waits for it on its
 * change stream. B's getMore commands then fail for 2 s (`failCommand` `alwaysOn` for B's
 * appName; once with a resumable error, once with a non-resumable one). While they fail, B
 * subscribes to `events$` and A releases. Once the fail point is off, B must get the key
 * within 2.5 s (well under the 5 s safety poll), and B's `events$` must report A's release
 * (A's holder id and fence, or a null holder, never another's) and B's own acquisition, in
 * that order. Besides the history checker, every recorded event's holder must be the one
 * the history gives for its key and fence.
 */
export const eventsStreamFailures: Scenario = {
  name: 'events$ during change-stream failures (getMore failing)',
  async run(server) {
    const run = new FaultRun(server, 'eventsfail');
    const expect = new Expectations();
    const notes: string[] = [];
    let events = 0;
    try {
      const [a, b] = await run.spawn([
        { label: 'evHolder', options: { operationTimeoutMs } },
        { label: 'evWaiter', options: { operationTimeoutMs, safetyPollIntervalMs } },
      ]);
      run.sampleLeases({ boundMs: orphanBoundMs(operationTimeoutMs) });
      for (const fault of getMoreFaults) {
        const { note, recorded } = await failingStream(run, a, b, fault, expect);
        notes.push(note);
        events += recorded;
      }
      const violations = await run.check({ leaseMs: 5000 }, expect.violations);
      return {
        operations: run.history.sections.length + events,
        violations,
        notes: [...notes, run.leaseSamplingNotes()].join('; '),
      };
    } finally {
      await run.stop();
    }
  },
};

async function failingStream(
  run: FaultRun,
  a: StartedWorker,
  b: StartedWorker,
  fault: GetMoreFault,
  expect: Expectations,
): Promise<{ note: string; recorded: number }> {
  const key = `events:${fault.name}`;
  const held = await run.hold(a, { key, ttlMs: 60_000, timeoutMs: 5000, renew: false });
  const waiting = run
    .hold(b, { key, ttlMs: 5000, timeoutMs: 20_000, renew: false })
    .then((lock) => ({ lock, error: undefined }))
    .catch((error: unknown) => ({ lock: undefined, error }));
  // Let B's attempt find the key held and its change stream open before its getMores fail.
  await sleep(700);
  const failingFrom = sharedClockMs();
  await run.failPoint('alwaysOn', fault.data(b.label));
  let failingUntil: number;
  try {
    await sleep(subscribeAfterMs);
    await b.process.call('watchEvents', { keys: [key] });
    await sleep(Math.max(0, failingFrom + releaseAfterMs - sharedClockMs()));
    const released = await a.process.call('release', { key });
    expect.that(released.outcome === 'released', key, `A's release: ${released.outcome}`);
    await sleep(Math.max(0, failingFrom + failingMs - sharedClockMs()));
  } finally {
    await run.failPoint('off');
    failingUntil = sharedClockMs();
  }

  const woke = await waiting;
  const wakeMs = woke.lock ? woke.lock.start - failingUntil : Number.NaN;
  expect.that(
    woke.lock !== undefined,
    key,
    `B did not get the key after the getMore failures: ${String(woke.error)}`,
  );
  if (woke.lock) {
    expect.that(
      wakeMs <= wakeBoundMs,
      key,
      `B got the key ${Math.round(wakeMs)} ms after the ${fault.name} getMore failures ended ` +
        `(bound ${wakeBoundMs} ms, well under the 5 s safety poll): a lost wake-up`,
    );
  }

  // B's own acquisition arrives on its stream shortly after its grant.
  const deadline = sharedClockMs() + eventWaitMs;
  let recorded: RecordedEvents = await b.process.call('takeEvents', {});
  while (
    woke.lock &&
    !recorded.events.some((e) => e.type === 'acquired' && e.fence === woke.lock?.fence) &&
    sharedClockMs() < deadline
  ) {
    await sleep(100);
    recorded = await b.process.call('takeEvents', {});
  }
  recorded = await b.process.call('takeEvents', { unsubscribe: true });
  if (woke.lock) await b.process.call('release', { key });

  // B subscribed while its client's server was unknown (each failed getMore marks it so): the
  // stream must still start at the subscription, not when its first aggregate could run (S6).
  checkEvents(run, key, held.fence, a.holderId, woke.lock?.fence, b.holderId, recorded, expect);
  const seen = recorded.events
    .map((e) => `${e.type} ${e.fence ?? '-'} by ${e.holderId ?? 'null'}`)
    .join(', ');
  return {
    note:
      `${fault.name}: B got the key ${Math.round(wakeMs)} ms after the failures ended; ` +
      `events$ saw [${seen}]; ${recorded.stream?.opened ?? '?'} streams opened so far`,
    recorded: recorded.events.length,
  };
}

function checkEvents(
  run: FaultRun,
  key: string,
  releasedFence: string,
  releasedBy: string,
  acquiredFence: string | undefined,
  acquiredBy: string,
  recorded: RecordedEvents,
  expect: Expectations,
): void {
  expect.that(
    recorded.errors.length === 0,
    key,
    `B's events$ errored: ${recorded.errors.join('; ')}`,
  );
  expect.that(!recorded.completed, key, "B's events$ completed while the service was open");
  const describe = (e: RecordedLockEvent) =>
    `${e.type} of ${e.key} fence ${e.fence ?? 'null'} by ${e.holderId ?? 'null'}`;
  // A release event names no fence (docs/engine-v2.md); one that names one names A's.
  const release = recorded.events.findIndex(
    (e) => e.type === 'released' && (e.fence === releasedFence || e.fence === null),
  );
  expect.that(
    release >= 0,
    key,
    `B's events$ never reported A's release (fence ${releasedFence}); it saw: ` +
      `[${recorded.events.map(describe).join(', ')}]`,
  );
  if (release >= 0) {
    const holderId = recorded.events[release].holderId;
    expect.that(
      holderId === releasedBy || holderId === null,
      key,
      `A's release was reported with holder ${holderId}, not A's (${releasedBy}) or null`,
    );
  }
  if (acquiredFence !== undefined) {
    const acquisition = recorded.events.findIndex(
      (e) => e.type === 'acquired' && e.fence === acquiredFence,
    );
    expect.that(
      acquisition >= 0,
      key,
      `B's events$ never reported B's acquisition (fence ${acquiredFence}); it saw: ` +
        `[${recorded.events.map(describe).join(', ')}]`,
    );
    if (acquisition >= 0) {
      const holderId = recorded.events[acquisition].holderId;
      expect.that(
        holderId === acquiredBy || holderId === null,
        key,
        `B's acquisition was reported with holder ${holderId}, not B's (${acquiredBy}) or null`,
      );
    }
    if (release >= 0 && acquisition >= 0) {
      expect.that(
        release < acquisition,
        key,
        "B's events$ reported B's acquisition before A's release",
      );
    }
  }
  // Every event names the holder the history gives for its key and fence, or none.
  const holderOf = (fence: string): SectionRecord | undefined =>
    run.history.sections.find((s) => s.key === key && s.fence === fence);
  for (const event of recorded.events) {
    if (event.holderId === null || event.fence === null) continue;
    const section = holderOf(event.fence);
    expect.that(
      section === undefined || section.holder === event.holderId,
      key,
      `events$ reported ${describe(event)}, but fence ${event.fence} was ${section?.holder}'s`,
    );
  }
}
