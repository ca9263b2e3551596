import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { HeldLock } from '../../support/fault-protocol';
import type { FaultServer } from '../../support/fault-server';
import { countByKind } from '../harness/contend-checks';
import { FaultRun, type StartedWorker } from '../harness/fault-run';
import { orphanBoundMs } from '../history/orphans';
import { grantTime } from '../history/checker';
import { GRANT_LEASE_MS, GrantSampler, GrantWatcher, poll, type GrantScenario } from './grant-run';
import { dumpHistory } from './modes-run';
import { Expectations, sleep, type ScenarioOutcome } from './scenario';

/** The releasing holder's lease: long, so waiters do not wake at its end (it is released early). */
const holderTtlMs = 20_000;
/** The waiters' leases once they hold, renewed: a frozen holder's runs out while frozen. */
const waiterTtlMs = 1500;
const waitTimeoutMs = 40_000;
/** The grantee stays frozen this long past its last grant: past the grant lease. */
const frozenPastGrantMs = GRANT_LEASE_MS + 600;
/** A thawed holder whose lease ran out meanwhile is told this soon after SIGCONT. */
const thawNoticeMs = 250;
/**
 * The other waiter (5 s safety poll, told nothing of a grant to another process) takes the key
 * once the frozen grantee's grant has run out: by the grant lease plus this.
 */
const takeoverSlackMs = 2500;
/** After a thawed grantee handed its ended grant on, the head confirms within this. */
const handOnBoundMs = 2500;
/** The quiet waiter's safety poll: nothing but the thawed grantee's hand-over may wake it. */
const quietPollMs = 30_000;

/**
 * What one key of a round probes. On each, the grantee process reserved first (it is the head)
 * and one other process waits behind it; the holder releases while or before the grantee is
 * frozen.
 * - `before-grant`: released while the grantee is frozen: the grant goes to a frozen process.
 *   The other waiter (5 s safety poll) takes the key once the grant lease ran out; the grantee,
 *   thawed after that, must not hold it then, and gets it after the other's release, with a
 *   higher fence.
 * - `before-grant-quiet`: the same, but the other waiter wakes only on its change stream (30 s
 *   safety poll): the thawed grantee's own attempt finds its grant ended and must hand the key
 *   to the head (the other waiter, which confirms within 2.5 s), not take it.
 * - `at-grant` (the round's trigger): released first; the grantee is frozen as soon as the
 *   parent's change stream reports the grant, racing its taking and confirming it: any outcome
 *   (not taken; taken on its event, from before the freeze; confirmed).
 * - `after-confirm` (the round's trigger): released first; the grantee is frozen as soon as its
 *   `acquire` resolved (1.5 s renewed lease): thawed past the grant lease, it must be told
 *   within 250 ms, and the other waiter has taken the key after its lease, before the thaw.
 */
export type KeyPlan = 'before-grant' | 'before-grant-quiet' | 'at-grant' | 'after-confirm';

/** One freeze of the grantee: at most one trigger key, any number of keys granted while frozen. */
export type PauseRound = KeyPlan[];

export interface GrantPauseOptions {
  libDir?: string;
  rounds: PauseRound[];
  name: string;
}

interface Cast {
  holder: StartedWorker;
  grantee: StartedWorker;
  other: StartedWorker | undefined;
  quiet: StartedWorker | undefined;
}

interface KeyRun {
  key: string;
  plan: KeyPlan;
  other: StartedWorker;
  granteeLock: Promise<HeldLock>;
  otherLock: Promise<HeldLock>;
  releasedAt: number;
  /** The lock document right after the freeze (or after the release, if released later). */
  fenceWhenFrozen: string | null;
  confirmedWhenFrozen: boolean;
}

/**
 * Direct grant to a process frozen with SIGSTOP past the grant lease, then thawed (see
 * {@link KeyPlan}): a holder (20 s leases, released early), the grantee (the oldest waiting
 * process on each key) and the other waiting processes; each round freezes the grantee once,
 * over several keys. Checked, besides each key's promises: the checker (no overlap, a frozen
 * holder told on thaw, fences increasing in grant order, nothing left held) and no orphaned
 * lease.
 */
export async function runGrantPauses(
  server: FaultServer,
  options: GrantPauseOptions,
): Promise<ScenarioOutcome> {
  const run = new FaultRun(server, options.name);
  const expect = new Expectations();
  const notes: string[] = [];
  let watcher: GrantWatcher | undefined;
  try {
    const plans = options.rounds.flat();
    const needsQuiet = plans.includes('before-grant-quiet');
    const needsOther = plans.some((p) => p !== 'before-grant-quiet');
    const spawnedFrom = sharedClockMs();
    const workers = await run.spawn([
      { label: 'holder', libDir: options.libDir },
      { label: 'grantee', libDir: options.libDir },
      ...(needsOther ? [{ label: 'other', libDir: options.libDir }] : []),
      ...(needsQuiet
        ? [
            {
              label: 'quiet',
              libDir: options.libDir,
              options: { safetyPollIntervalMs: quietPollMs },
            },
          ]
        : []),
    ]);
    const spawnMs = sharedClockMs() - spawnedFrom;
    const byLabel = (label: string) => workers.find((w) => w.label === label);
    const cast: Cast = {
      holder: byLabel('holder') as StartedWorker,
      grantee: byLabel('grantee') as StartedWorker,
      other: byLabel('other'),
      quiet: byLabel('quiet'),
    };
    run.sampleLeases({ boundMs: orphanBoundMs(5000) });
    watcher = new GrantWatcher(run);
    await watcher.start();
    for (const [i, round] of options.rounds.entries()) {
      notes.push(`round ${i + 1}: ${await pauseRound(run, watcher, expect, cast, round, i)}`);
    }
    const violations = await run.check({ leaseMs: holderTtlMs }, expect.violations);
    dumpHistory(run, { notes });
    return {
      operations: run.history.sections.length,
      violations,
      notes:
        `${workers.length} processes started in ${Math.round(spawnMs)} ms; ${notes.join('; ')}; ` +
        `${run.leaseSamplingNotes()}; violations: ${countByKind(violations)}`,
    };
  } finally {
    await watcher?.close();
    await run.stop();
  }
}

async function pauseRound(
  run: FaultRun,
  watcher: GrantWatcher,
  expect: Expectations,
  { holder, grantee, other, quiet }: Cast,
  round: PauseRound,
  index: number,
): Promise<string> {
  const samplers = new Map<string, GrantSampler>();
  const read = (key: string) => {
    let sampler = samplers.get(key);
    if (!sampler) samplers.set(key, (sampler = new GrantSampler(run, key, 50)));
    return sampler.read();
  };
  const inLine = async (key: string, worker: StartedWorker) => {
    const found = await poll(async () => {
      const sample = await read(key);
      return sample?.reservations.some((r) => r.holder === worker.holderId) ? true : undefined;
    }, 5000);
    expect.that(found === true, key, `${worker.label} never reserved its place`);
  };
  const wait = (worker: StartedWorker, key: string) => {
    const lock = run.hold(worker, {
      key,
      ttlMs: waiterTtlMs,
      timeoutMs: waitTimeoutMs,
      renew: true,
    });
    // Settled here too, so that a rejection is never unhandled; awaited below.
    lock.catch(() => undefined);
    return lock;
  };
  try {
    // Every key held, the grantee first in line on each, then the others behind it; the quiet
    // waiter last, so that its own next attempt (a refresh) comes as late as can be.
    const keys = round.map((plan, k) => ({ key: `gp${index}.${k}:${plan}`, plan }));
    for (const { key } of keys) {
      await run.hold(holder, { key, ttlMs: holderTtlMs, timeoutMs: 5000, renew: false });
    }
    const granteeLocks = new Map<string, Promise<HeldLock>>();
    for (const { key } of keys) {
      granteeLocks.set(key, wait(grantee, key));
      await inLine(key, grantee);
    }
    const others = new Map<string, { worker: StartedWorker; lock: Promise<HeldLock> }>();
    const ordered = [...keys].sort(
      (a, b) => Number(a.plan === 'before-grant-quiet') - Number(b.plan === 'before-grant-quiet'),
    );
    for (const { key, plan } of ordered) {
      const worker = (plan === 'before-grant-quiet' ? quiet : other) as StartedWorker;
      others.set(key, { worker, lock: wait(worker, key) });
      await inLine(key, worker);
    }
    await sleep(100);

    const release = async (key: string) => {
      const releasedAt = sharedClockMs();
      const released = await holder.process.call('release', { key });
      expect.that(
        released.outcome === 'released',
        key,
        `the holder's release: ${released.outcome}`,
      );
      return releasedAt;
    };
    const releasedAt = new Map<string, number>();
    // The trigger: freeze at the grant, after the confirmation, or at once.
    const trigger = keys.find((k) => k.plan === 'at-grant' || k.plan === 'after-confirm');
    if (trigger) {
      const at = await release(trigger.key);
      releasedAt.set(trigger.key, at);
      if (trigger.plan === 'at-grant') {
        const heard = await watcher.next((e) => e.key === trigger.key, at, 3000);
        expect.that(
          heard?.grantee === grantee.holderId,
          trigger.key,
          `the grant went to ${heard?.grantee ?? 'nobody'}`,
        );
      } else {
        const held = await Promise.race([
          granteeLocks.get(trigger.key),
          sleep(3000).then(() => undefined),
        ]);
        expect.that(held !== undefined, trigger.key, 'the grantee did not confirm in 3 s');
      }
    }
    run.pause(grantee);
    const runs: KeyRun[] = [];
    for (const { key, plan } of keys) {
      if (key !== trigger?.key) releasedAt.set(key, await release(key));
      const sample = await read(key);
      const confirmedWhenFrozen =
        sample?.live === true && sample.holder === grantee.holderId && !sample.grant;
      if (plan === 'before-grant' || plan === 'before-grant-quiet') {
        expect.that(
          sample?.grant === true && sample.holder === grantee.holderId,
          key,
          `the release did not grant the key to the frozen head: owner ${sample?.owner}, ` +
            `holder ${sample?.holder}, live ${sample?.live}`,
        );
      }
      const { worker, lock } = others.get(key) as {
        worker: StartedWorker;
        lock: Promise<HeldLock>;
      };
      runs.push({
        key,
        plan,
        other: worker,
        granteeLock: granteeLocks.get(key) as Promise<HeldLock>,
        otherLock: lock,
        releasedAt: releasedAt.get(key) as number,
        fenceWhenFrozen: sample?.fence ?? null,
        confirmedWhenFrozen,
      });
    }
    const lastRelease = Math.max(...runs.map((r) => r.releasedAt));
    await sleep(Math.max(0, lastRelease + frozenPastGrantMs - sharedClockMs()));
    const otherEarly = new Map<string, boolean>();
    for (const r of runs) {
      otherEarly.set(r.key, (await Promise.race([r.otherLock, sleep(0)])) !== undefined);
    }
    const thawedAt = run.resume(grantee);
    const results = await Promise.all(runs.map((r) => drainKey(run, expect, r, grantee, thawedAt)));
    const handedOutKeys = new Set<string>();

    for (const [i, r] of runs.entries()) {
      const { order } = results[i];
      const granteeHeld = order.find((o) => o.worker === grantee)?.held;
      const otherHeld = order.find((o) => o.worker === r.other)?.held;
      // Frozen at the grant, the grantee may have taken it on its change event already, its
      // confirmation not sent or not landed: it then held the lock from before the freeze, like
      // a confirmed grant, and the checker sees it told on thaw. Never after the thaw.
      const handedOut =
        r.plan === 'at-grant' &&
        granteeHeld?.fence === r.fenceWhenFrozen &&
        grantTime(granteeHeld) < thawedAt;
      if (handedOut) handedOutKeys.add(r.key);
      const confirmed = r.confirmedWhenFrozen || r.plan === 'after-confirm' || handedOut;
      if (!confirmed) {
        // The grant ran out while its process was frozen: it was never confirmed.
        expect.that(
          granteeHeld?.fence !== r.fenceWhenFrozen,
          r.key,
          `the grantee held the key with the fence of the grant (${r.fenceWhenFrozen}) that ran ` +
            'out while it was frozen',
        );
        expect.that(
          order[0]?.worker === r.other,
          r.key,
          `${order[0]?.worker.label} took the key first after the release: the grantee's grant ` +
            `had run out while it was frozen and ${r.other.label} waited ahead of it`,
        );
        if (otherHeld) {
          const bound =
            r.plan === 'before-grant-quiet'
              ? thawedAt + handOnBoundMs
              : r.releasedAt + GRANT_LEASE_MS + takeoverSlackMs;
          expect.that(
            otherHeld.start <= bound,
            r.key,
            `${r.other.label} got the key ${Math.round(otherHeld.start - r.releasedAt)} ms after ` +
              `the release (${Math.round(otherHeld.start - thawedAt)} ms after SIGCONT); bound ` +
              `${Math.round(bound - r.releasedAt)} ms`,
          );
        }
      } else {
        expect.that(
          otherEarly.get(r.key) === true,
          r.key,
          `${r.other.label} had not taken the key when the grantee, frozen after confirming ` +
            'its grant, was thawed',
        );
      }
      if (granteeHeld && otherHeld) {
        const [a, b] =
          grantTime(granteeHeld) < grantTime(otherHeld)
            ? [granteeHeld, otherHeld]
            : [otherHeld, granteeHeld];
        expect.that(BigInt(b.fence) > BigInt(a.fence), r.key, `fences ${a.fence}, then ${b.fence}`);
      }
    }
    return runs
      .map((r, i) => {
        const state = handedOutKeys.has(r.key)
          ? 'taken on its event, unconfirmed'
          : r.confirmedWhenFrozen || r.plan === 'after-confirm'
            ? 'confirmed'
            : 'unconfirmed';
        const order = results[i].order
          .map((o) => `${o.worker.label} ${Math.round(o.held.start - r.releasedAt)} ms`)
          .join(', then ');
        return `${r.plan} (${state} when frozen): ${order} after the release`;
      })
      .join(', ');
  } finally {
    await Promise.all([...samplers.values()].map((s) => s.stop()));
  }
}

/**
 * After the thaw: whoever holds the key gives it back, then the other, in the order they got
 * it. A grantee that held across the freeze (its lease ran out meanwhile) must be told at once.
 */
async function drainKey(
  run: FaultRun,
  expect: Expectations,
  r: KeyRun,
  grantee: StartedWorker,
  thawedAt: number,
): Promise<{ order: { worker: StartedWorker; held: HeldLock }[] }> {
  const order: { worker: StartedWorker; held: HeldLock }[] = [];
  const pending = new Map<StartedWorker, Promise<HeldLock>>([
    [grantee, r.granteeLock],
    [r.other, r.otherLock],
  ]);
  while (pending.size > 0) {
    const next = await Promise.race(
      [...pending].map(([worker, lock]) => lock.then((held) => ({ worker, held }))),
    );
    pending.delete(next.worker);
    order.push(next);
    if (next.worker === grantee && next.held.start < thawedAt) {
      const loss = await grantee.process.call('waitForLoss', { key: r.key, timeoutMs: 2000 });
      expect.that(
        loss.signalAt !== null && loss.signalAt <= thawedAt + thawNoticeMs,
        r.key,
        `the grantee, frozen past its lease, was told ${
          loss.signalAt === null
            ? 'never'
            : `${Math.round(loss.signalAt - thawedAt)} ms after SIGCONT`
        }`,
      );
    } else {
      await sleep(150);
    }
    await next.worker.process.call('release', { key: r.key });
  }
  return { order };
}

/** Two rounds: every plan once, and a quiet key in each (the stale-confirmation probe). */
export const grantPauseRounds: PauseRound[] = [
  ['after-confirm', 'before-grant', 'before-grant-quiet'],
  ['at-grant', 'before-grant-quiet'],
];

export const grantGranteePaused: GrantScenario = {
  name: '3. granted process SIGSTOPped past the grant lease, then SIGCONT',
  run: (server: FaultServer, libDir?: string) =>
    runGrantPauses(server, { libDir, rounds: grantPauseRounds, name: 'grant_pause' }),
};
