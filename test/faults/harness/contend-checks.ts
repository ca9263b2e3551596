import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { ContendStats } from '../../support/fault-protocol';
import type { SectionRecord, Violation } from '../history/history';
import type { Expectations } from '../scenarios/scenario';
import type { FaultRun, StartedWorker } from './fault-run';

/** A `contend` call's result, or why there is none: it failed, or was still running when due. */
export type Settled = { stats: ContendStats } | { failure: string };

/** Waits for a `contend` call, but not past `deadline` (shared clock): a hung worker is a finding. */
export async function settleWithin(
  call: Promise<ContendStats>,
  deadline: number,
): Promise<Settled> {
  let timer: NodeJS.Timeout | undefined;
  const stuck = new Promise<Settled>((resolve) => {
    timer = setTimeout(
      () => resolve({ failure: 'contend still running well after its end' }),
      Math.max(0, deadline - sharedClockMs()),
    );
  });
  try {
    return await Promise.race([
      call.then(
        (stats) => ({ stats }),
        (error: unknown) => ({ failure: `contend failed: ${String(error)}` }),
      ),
      stuck,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Checks each worker's `contend` result: it finished, no error other than the library's typed
 * ones (the contention loop counts those), every acquisition settled within its `timeoutMs`
 * plus `settleBoundMs`. Hands the failed acquire calls to the run's orphan check. Returns the
 * stats of the workers that finished.
 */
export function checkContention(
  run: FaultRun,
  workers: StartedWorker[],
  results: Settled[],
  expect: Expectations,
  bounds: { timeoutMs: number; settleBoundMs: number },
): ContendStats[] {
  const stats: ContendStats[] = [];
  for (const [i, result] of results.entries()) {
    const label = workers[i].label;
    if ('failure' in result) {
      expect.that(false, '*', `${label}: ${result.failure}`);
      continue;
    }
    stats.push(result.stats);
    run.noteFailedCalls(workers[i], result.stats.failedCalls ?? []);
    const { errors, maxSettleOvershootMs } = result.stats;
    expect.that(
      errors.length === 0,
      '*',
      `${label}: ${errors.length} worker errors: ${errors.join('; ')}`,
    );
    expect.that(
      maxSettleOvershootMs <= bounds.settleBoundMs,
      '*',
      `${label}: an acquisition settled ${Math.round(maxSettleOvershootMs)} ms after its ` +
        `timeoutMs (${bounds.timeoutMs} ms); bound ${bounds.settleBoundMs} ms`,
    );
  }
  return stats;
}

/** Sections counted by the workers must all have been reported to the parent. */
export function expectAllReported(
  stats: ContendStats[],
  workers: number,
  reported: number,
  expect: Expectations,
): number {
  const counted = stats.reduce((sum, s) => sum + s.sections, 0);
  if (stats.length === workers) {
    expect.that(
      counted === reported,
      '*',
      `${counted} sections counted by the workers, ${reported} reported`,
    );
  }
  return counted;
}

/**
 * Lost sections whose holder let go inside its lease, untold: the hold ended before its local
 * deadline and the signal had not aborted before `release()` was sent (the brief's count).
 * Of those, `falseLockLost` are the ones that only `release()` declared lost: it threw
 * `LockLostError` and the signal aborted then, before the deadline (the deadline's own abort
 * would mean the release reached MongoDB after the lease had ended). The rest were told at
 * their deadline, their release still unconfirmed then.
 */
export function lostInsideLease(sections: readonly SectionRecord[]): {
  all: SectionRecord[];
  falseLockLost: SectionRecord[];
} {
  const all = sections.filter(
    (s) =>
      s.outcome === 'lost' &&
      s.end !== null &&
      s.deadline !== null &&
      s.end < s.deadline &&
      (s.signalAt === null || s.signalAt > s.end),
  );
  const falseLockLost = all.filter(
    (s) =>
      s.releaseError === 'LockLostError' &&
      s.signalAt !== null &&
      s.deadline !== null &&
      // Timers never fire early; 2 ms for rounding between the two clocks' readings.
      s.signalAt < s.deadline - 2,
  );
  return { all, falseLockLost };
}

export function describeSection(s: SectionRecord): string {
  const at = (t: number | null) => (t === null ? 'never' : `${Math.round(t - s.start)} ms`);
  return (
    `${s.worker} on ${s.key} (fence ${s.fence}): held ${at(s.end)}, deadline ${at(s.deadline)}, ` +
    `signal ${at(s.signalAt)} after the grant, release tried ${s.releaseTries ?? 1}x, ` +
    `threw ${s.releaseError ?? 'nothing'}`
  );
}

/** Sums the workers' command tallies (`commandTally`). */
export function sumTallies(tallies: Record<string, number>[]): Record<string, number> {
  const total: Record<string, number> = {};
  for (const tally of tallies) {
    for (const [name, count] of Object.entries(tally)) total[name] = (total[name] ?? 0) + count;
  }
  return total;
}

/** How often `outcome` was seen on any lock command (`<kind>:<outcome>` entries). */
export function outcomeCount(tally: Record<string, number>, outcome: string): number {
  return Object.entries(tally)
    .filter(([name]) => name.endsWith(`:${outcome}`))
    .reduce((sum, [, count]) => sum + count, 0);
}

/** The tally without the commands that went through, e.g. `acquire:network 4, renew:slow 1`. */
export function formatFaultTally(tally: Record<string, number>): string {
  const faults = Object.entries(tally)
    .filter(([name]) => !name.endsWith(':ok'))
    .sort(([a], [b]) => a.localeCompare(b));
  return faults.length === 0 ? 'none' : faults.map(([n, c]) => `${n} ${c}`).join(', ');
}

export function countByKind(violations: readonly Violation[]): string {
  const counts = new Map<string, number>();
  for (const v of violations) counts.set(v.kind, (counts.get(v.kind) ?? 0) + 1);
  return counts.size === 0 ? 'none' : [...counts].map(([k, n]) => `${n} ${k}`).join(', ');
}

export function sumStats(stats: ContendStats[], field: keyof ContendStats): number {
  return stats.reduce((sum, s) => sum + (typeof s[field] === 'number' ? s[field] : 0), 0);
}

export function maxOvershoot(stats: ContendStats[]): number {
  return Math.round(Math.max(...stats.map((s) => s.maxSettleOvershootMs)));
}

export function randomInt(min: number, max: number): number {
  return min + Math.floor(Math.random() * (max - min + 1));
}
