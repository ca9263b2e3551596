import type { LockHandle, LockService } from '../../lib';
import type { SectionRecord } from '../faults/history/history';
import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import { deadlineToRecord, watchSignal, type SignalWatch } from './fault-contention';
import type { WithLockArgs, WithLockOutcome } from './fault-protocol';

/**
 * Runs `service.withLock(key, fn)`, where `fn` works for `workMs` and stops early when the
 * handle's signal aborts, as a well-behaved handler would. The section is reported open as
 * soon as `fn` starts (so it is accounted for even if the worker never reports back), and
 * complete once `withLock` settles: start and end of the work, the local deadline read when
 * the work ended (just before `withLock` sends its release) or when the signal aborted, and
 * the signal's time. Resolves with `fn`'s result or the error's name; never rejects.
 */
export async function runWithLock(
  service: LockService,
  args: WithLockArgs,
  label: string,
  report: (section: SectionRecord) => void,
): Promise<WithLockOutcome> {
  const calledAt = sharedClockMs();
  // Set by fn when it starts (an object, so the assignment inside the callback is seen).
  const started: { handle?: LockHandle; section?: SectionRecord; watch?: SignalWatch } = {};
  const outcome = await service
    .withLock(
      args.key,
      async (handle) => {
        const watch = watchSignal(handle);
        const section: SectionRecord = {
          key: args.key,
          fence: handle.fence.toString(),
          holder: service.holderId,
          worker: `${label}:withLock`,
          pid: process.pid,
          start: sharedClockMs(),
          end: null,
          outcome: 'open',
          deadline: null,
          signalAt: null,
        };
        Object.assign(started, { handle, section, watch });
        report({ ...section });
        await sleepUnlessAborted(args.workMs, handle.signal);
        section.end = sharedClockMs();
        // Read as the work ends, just before withLock sends its release (or kept from the abort).
        section.deadline = deadlineToRecord(handle, watch);
        return handle.signal.aborted ? 'stopped on abort' : 'done';
      },
      { ttlMs: args.ttlMs, timeoutMs: args.timeoutMs, renew: args.renew ?? true },
    )
    .then(
      (result): WithLockOutcome => ({ ok: true, result, settledAt: sharedClockMs() }),
      (error: unknown): WithLockOutcome => ({
        ok: false,
        errorName: error instanceof Error ? error.name : typeof error,
        message: error instanceof Error ? error.message : String(error),
        settledAt: sharedClockMs(),
      }),
    );
  const { section, watch, handle } = started;
  if (section && watch && handle) {
    const lost = handle.signal.aborted || (!outcome.ok && outcome.errorName === 'LockLostError');
    // withLock rethrows fn's errors and LockLostError only; anything else after fn ran leaves
    // the acquisition unaccounted for, and the checker flags the section left open.
    const accounted = outcome.ok || lost;
    report({
      ...section,
      end: section.end ?? sharedClockMs(),
      deadline: section.deadline ?? deadlineToRecord(handle, watch),
      outcome: !accounted ? 'open' : lost ? 'lost' : 'released',
      signalAt: watch.signalAt,
    });
  }
  return { ...outcome, calledAt };
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
