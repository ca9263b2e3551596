import type { LockService } from '../../lib';
import { LockLostError, LockNotAcquiredError } from '../../lib/errors';
import type { SectionRecord } from '../faults/history/history';
import { sharedClockMs } from './fault-clock';
import type { ContendArgs, ContendStats, HoldPlan } from './fault-protocol';

/**
 * Several logical workers in this process contend for a few keys until the plan's end.
 * Each critical section sleeps for a random hold (some longer than the lease) and stops early
 * when the handle's signal says the lease was lost, as a well-behaved user would.
 */
export async function runContention(
  service: LockService,
  args: ContendArgs,
  label: string,
  report: (section: SectionRecord) => void,
): Promise<ContendStats> {
  const stats: ContendStats = { sections: 0, lost: 0, timeouts: 0, errors: [] };
  let started = 0;
  const noteError = (error: unknown) => {
    if (stats.errors.length < 20) stats.errors.push(String(error));
  };
  const mayStart = () => sharedClockMs() < args.stopAt && started < args.maxSections;

  async function worker(index: number): Promise<void> {
    while (mayStart()) {
      started++;
      const key = args.keys[Math.floor(Math.random() * args.keys.length)];
      const renew = Math.random() < args.renewShare;
      try {
        const section = await oneSection(
          service,
          args,
          key,
          renew,
          `${label}:w${index}`,
          noteError,
        );
        report(section);
        stats.sections++;
        if (section.outcome === 'lost') stats.lost++;
      } catch (error) {
        if (error instanceof LockNotAcquiredError) stats.timeouts++;
        else noteError(error);
      }
    }
  }

  await Promise.all(Array.from({ length: args.workers }, (_, i) => worker(i)));
  return stats;
}

async function oneSection(
  service: LockService,
  args: ContendArgs,
  key: string,
  renew: boolean,
  worker: string,
  onError: (error: unknown) => void,
): Promise<SectionRecord> {
  const handle = await service.acquire(key, {
    ttlMs: args.ttlMs,
    timeoutMs: args.timeoutMs,
    renew,
  });
  const start = sharedClockMs();
  await sleepUnlessAborted(sampleHoldMs(args.hold), handle.signal);
  const end = sharedClockMs();
  let outcome: SectionRecord['outcome'] = handle.signal.aborted ? 'lost' : 'released';
  try {
    await handle.release();
  } catch (error) {
    // Anything but "lost" leaves the acquisition unaccounted for: the checker flags it.
    outcome = error instanceof LockLostError ? 'lost' : 'open';
    if (outcome === 'open') onError(error);
  }
  return {
    key,
    fence: handle.fence.toString(),
    holder: service.holderId,
    worker,
    pid: process.pid,
    start,
    end,
    outcome,
  };
}

function sampleHoldMs(plan: HoldPlan): number {
  if (Math.random() < plan.longShare) {
    return plan.longMinMs + Math.random() * (plan.longMaxMs - plan.longMinMs);
  }
  return Math.random() * plan.shortMaxMs;
}

function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done);
  });
}
