import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { HoldPlan } from '../../support/fault-protocol';
import type { FaultServer } from '../../support/fault-server';
import {
  checkContention,
  countByKind,
  expectAllReported,
  settleWithin,
  sumStats,
} from '../harness/contend-checks';
import { FaultRun, type StartedWorker } from '../harness/fault-run';
import type { Violation } from '../history/history';
import {
  asKeyStates,
  checkDeadHolds,
  DEAD_GRANT_MARGIN_MS,
  deadHolds,
  GRANT_LEASE_MS,
  GrantSampler,
  grantsSeen,
  GrantWatcher,
  type DeadHold,
  type SeenGrant,
  headOf,
  poll,
  type GrantSample,
  type GrantScenario,
} from './grant-run';
import type { ModeMixEntry } from './modes-protocol';
import { orphanBoundMs } from '../history/orphans';
import { dumpHistory, findStalls, modes, randomBetween, reports, waitSpans } from './modes-run';
import { Expectations, sleep, type ScenarioOutcome } from './scenario';

/** One victim per key, in turn: the costs of the kills (grants to the dead) overlap in time. */
const keys = ['gk0', 'gk1'];
const ttlMs = 1000;
/**
 * A dead waiting process may be granted its key twice (its reservation, moved to the back at the
 * first grant, comes round again while it lives): acquisitions outlast that; the bounds are
 * checked on the samples.
 */
const timeoutMs = 2 * GRANT_LEASE_MS + 5000;
const contenders = 2;
const workersPerContender = 2;
const hold: HoldPlan = { shortMaxMs: 200, longShare: 0.1, longMinMs: 850, longMaxMs: 1300 };
/** Longest the key may stay free while callers wait (they wake on the change stream). */
const stallBoundMs = 1000;
/**
 * How long a victim may take to reach the head of the line (or be granted) before it is killed
 * anyway, where it is (the notes say where): the contenders must still be contending then.
 */
const victimWaitMs = 6000;

/**
 * How a victim process dies:
 * - `head`: it reserved its place and reached the head of the line, then SIGKILL, before any
 *   grant to it: a later release grants the lock to a dead process.
 * - `granted`: SIGKILL as soon as the parent's change stream reports a grant to it, racing the
 *   victim's own confirmation (killed before, while or just after confirming).
 * - `frozen-then-granted`: SIGSTOP once it is the head of the line, then SIGKILL as soon as a
 *   release granted it the lock: granted while alive, it never confirms (unless the grant came
 *   before the SIGSTOP; the notes say which).
 */
export type KillPlan = 'head' | 'granted' | 'frozen-then-granted';

export interface GrantKillOptions {
  /** Library copy the workers load (`FAULT_LIB_DIR`): the mutants. */
  libDir?: string;
  /** How long the contenders contend. Default 10 s. */
  durationMs?: number;
  /** One victim process per entry, killed in order. */
  victims: KillPlan[];
  /** Share of sections renewed, and their holds; the mutants ask for more renewed holds. */
  renewShare?: number;
  hold?: HoldPlan;
  name: string;
}

interface Kill {
  plan: KillPlan;
  victim: string;
  key: string;
  diedAt: number;
  /** What the lock document said of the victim just before SIGKILL. */
  stateAtKill: string;
}

/** The victim's state in the lock document. */
function victimState(sample: GrantSample | undefined, victim: StartedWorker): string {
  if (!sample) return 'no document';
  if (sample.live && sample.holder === victim.holderId) {
    return sample.grant ? 'granted, unconfirmed' : 'holding (confirmed)';
  }
  const place = sample.reservations.findIndex((r) => r.holder === victim.holderId);
  return place < 0 ? 'not in line' : place === 0 ? 'head of the line' : `in line at ${place}`;
}

/**
 * Two processes × 2 workers contend for one key (1 s leases, a share renewed, a share holding
 * past the lease unrenewed: those end by a waiter handing the ended lease to the head), both on
 * change streams, so each release hands the lock to the oldest waiting process. Victim processes
 * join the line one after the other and are killed as `victims` says. Checked: the checker
 * (protected intervals, notices, fence order, nothing left held but by the dead, within
 * reservation + grant lease); a dead process holds the key for at most one grant lease (or its
 * own lease, confirmed), and is granted it only while its reservation lives; the key is never
 * free for more than 1 s while callers wait; no worker error, every acquisition settled within
 * its timeout; at least one grant went to a dead process (the probe hit).
 */
export async function runGrantKills(
  server: FaultServer,
  options: GrantKillOptions,
): Promise<ScenarioOutcome> {
  const run = new FaultRun(server, options.name);
  const expect = new Expectations();
  const samplers = new Map<string, GrantSampler>();
  let watcher: GrantWatcher | undefined;
  try {
    const spawnedFrom = sharedClockMs();
    const workers = await run.spawn([
      ...Array.from({ length: contenders }, (_, i) => ({ label: `c${i}`, libDir: options.libDir })),
      ...options.victims.map((_, i) => ({ label: `v${i}`, libDir: options.libDir })),
    ]);
    const spawnMs = sharedClockMs() - spawnedFrom;
    const contending = workers.slice(0, contenders);
    const victims = workers.slice(contenders);
    run.sampleLeases({ boundMs: orphanBoundMs(5000) });
    for (const key of keys) samplers.set(key, new GrantSampler(run, key));
    const samplerOf = (key: string) => samplers.get(key) as GrantSampler;
    watcher = new GrantWatcher(run);
    await watcher.start();
    const stopAt = sharedClockMs() + (options.durationMs ?? 10_000);
    const mix: ModeMixEntry[] = [
      {
        mode: 'exclusive',
        share: 1,
        renewShare: options.renewShare ?? 0.3,
        hold: options.hold ?? hold,
      },
    ];
    const calls = contending.flatMap((w) =>
      keys.map((key) =>
        settleWithin(
          modes(w).call('contendModes', {
            key,
            workers: workersPerContender,
            ttlMs,
            timeoutMs,
            mix,
            stopAt,
            maxSections: 2000,
            gapMaxMs: 30,
          }),
          stopAt + timeoutMs + 5000,
        ),
      ),
    );

    const kills: Kill[] = [];
    for (const [i, plan] of options.victims.entries()) {
      // The next victim joins right after the previous one died: their costs overlap.
      await sleep(i === 0 ? randomBetween(700, 1200) : randomBetween(200, 500));
      const victim = victims[i];
      const key = keys[i % keys.length];
      const sampler = samplerOf(key);
      const since = sharedClockMs();
      // Waits, holds a while if it gets the key (renewed), and is killed on the way.
      void modes(victim)
        .call('modeSection', {
          key,
          ttlMs,
          timeoutMs: 30_000,
          renew: true,
          holdMs: 3000,
          name: 'victim',
        })
        .catch(() => undefined);
      let stateAtKill = '';
      if (plan === 'head' || plan === 'frozen-then-granted') {
        const head = await poll(
          async () => {
            const sample = await sampler.read();
            return headOf(sample)?.holder === victim.holderId ||
              (sample?.live && sample.holder === victim.holderId)
              ? sample
              : undefined;
          },
          victimWaitMs,
          2,
        );
        stateAtKill = victimState(head ?? (await sampler.read()), victim);
      }
      if (plan !== 'head') {
        const frozen = plan === 'frozen-then-granted';
        if (frozen) run.pause(victim);
        const granted = await watcher.next(
          (e) => e.grantee === victim.holderId && e.key === key,
          since,
          victimWaitMs,
        );
        stateAtKill = granted
          ? `granted ${Math.round(sharedClockMs() - granted.heardAt)} ms before SIGKILL` +
            (frozen ? ', frozen' : '')
          : 'never granted';
      }
      const diedAt = await run.kill(victim);
      if (plan === 'granted') {
        const after = await sampler.read();
        stateAtKill +=
          after?.grant && after.holder === victim.holderId ? ', unconfirmed' : ', confirmed';
      }
      kills.push({ plan, victim: victim.label, key, diedAt, stateAtKill });
    }

    const results = await Promise.all(calls);
    // One result per (process, key): `checkContention` reads them per worker.
    const callers = contending.flatMap((w) => keys.map(() => w));
    const stats = checkContention(run, callers, results, expect, {
      timeoutMs,
      settleBoundMs: 2000,
    });
    const sections = reports(run);
    const pids = new Set(contending.map((w) => w.process.pid));
    expectAllReported(
      stats,
      callers.length,
      sections.filter((s) => pids.has(s.pid)).length,
      expect,
    );
    expect.that(
      kills.length === options.victims.length,
      '*',
      `only ${kills.length} of ${options.victims.length} victims killed`,
    );
    // The last dead grant runs out before the final state is read.
    const lastDeath = Math.max(0, ...kills.map((k) => k.diedAt));
    await sleep(Math.max(0, lastDeath + GRANT_LEASE_MS + 500 - sharedClockMs()));
    const failedCalls = stats.flatMap((s) => s.failedCalls ?? []);
    const checks: Violation[] = [];
    const holds: DeadHold[] = [];
    const grants: SeenGrant[] = [];
    for (const key of keys) {
      const samples = await samplerOf(key).stop();
      const ofKey = deadHolds(samples, run.history.deaths);
      holds.push(...ofKey);
      grants.push(...grantsSeen(samples));
      checks.push(...checkDeadHolds(key, ofKey, run.history.deaths, ttlMs));
      const waits = waitSpans(
        sections.filter((s) => s.key === key),
        failedCalls.filter((c) => c.key === key),
      );
      checks.push(...findStalls(key, asKeyStates(samples), waits, stallBoundMs));
    }
    if (options.victims.some((p) => p !== 'granted')) {
      expect.that(
        holds.some((h) => h.grant),
        '*',
        'no grant went to a dead process: the kills probed nothing',
      );
    }
    const violations = await run.check({ leaseMs: ttlMs, expiryMarginMs: DEAD_GRANT_MARGIN_MS }, [
      ...expect.violations,
      ...checks,
    ]);
    dumpHistory(run, { kills, stats, holds });
    return {
      operations: sections.length,
      violations,
      notes:
        `${workers.length} processes started in ${Math.round(spawnMs)} ms; ` +
        `${sections.length} sections, ${grants.length} grants seen ` +
        `(${grants.filter((g) => g.confirmedAt !== null).length} confirmed), ` +
        `${sumStats(stats, 'lost')} lost, ${sumStats(stats, 'timeouts')} timeouts; kills: ` +
        `${kills.map((k) => `${k.plan} on ${k.key} (${k.stateAtKill})`).join(', ')}; the dead held the key ` +
        `${holds.map((h) => `${Math.round(h.to - h.from)} ms${h.grant ? ' (grant)' : ''}`).join(', ') || 'never'}` +
        `; ${run.leaseSamplingNotes()}; violations: ${countByKind(violations)}`,
    };
  } finally {
    await watcher?.close();
    await Promise.all([...samplers.values()].map((sampler) => sampler.stop()));
    await run.stop();
  }
}

export const grantHeadKilled: GrantScenario = {
  name: '1. head of the line SIGKILLed while 2 processes contend',
  run: (server: FaultServer, libDir?: string) =>
    runGrantKills(server, { libDir, victims: ['head', 'head'], name: 'grant_head' }),
};

export const grantGranteeKilled: GrantScenario = {
  name: '2. granted process SIGKILLed (at its grant; frozen at the head, granted, killed)',
  run: (server: FaultServer, libDir?: string) =>
    runGrantKills(server, {
      libDir,
      victims: ['granted', 'frozen-then-granted'],
      name: 'grant_grantee',
    }),
};
