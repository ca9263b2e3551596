import { localLeaseEnd } from './lease-keeper';
import type { LineAcquirer } from './line-acquirer';
import type { LineHold } from './line-handover';
import { LockStoreUnavailableError } from './errors/lock-store-unavailable.error';
import { quoteLockKey } from './keys/lock-key';
import { isPassingFailure } from './store/mongo-error-codes';
import { retriedUntil, settledBy, wakeUp } from './util/timers';

type Renewer = Pick<LineAcquirer, 'renew'>;

/**
 * Keeps the keys a call of several keys took renewed while it waits for its later ones, each
 * once half its lease is gone. A key whose renewal fails for good is renewed no more (the check
 * before hand-out, {@link refreshEarlier}, finds it and takes it again); the others still are.
 * Returns what stops it at once: a renewal in flight then is neither waited for nor used.
 */
export function keepRenewed(acquirer: Renewer, holds: LineHold[], ttlMs: number): () => void {
  const stop = new AbortController();
  const kept = new Set(holds.keys());
  void (async () => {
    while (kept.size > 0) {
      const due = Math.min(...[...kept].map((index) => holds[index].leaseEnd)) - ttlMs / 2;
      if ((await wakeUp({}, due, stop.signal)) === 'aborted') return;
      for (const index of kept) {
        // Due ones only; `>`: a fake clock stands still at `due`, where this one is due.
        if (holds[index].leaseEnd - performance.now() > ttlMs / 2) continue;
        const renewing = renewed(acquirer, holds[index], ttlMs, holds[index].leaseEnd, stop.signal);
        const hold = await renewing.catch(() => undefined);
        if (stop.signal.aborted) return;
        if (hold === undefined) kept.delete(index);
        else holds[index] = hold;
      }
    }
  })();
  return () => stop.abort();
}

/**
 * The index of the first hold whose lease ended or was removed, after renewing those that ran
 * short and those whose key is `named` by operator news (each forgotten as its renewal is sent).
 */
export async function refreshEarlier(
  acquirer: Renewer,
  holds: LineHold[],
  ttlMs: number,
  named: Set<string>,
  callEnd: number,
  signal: AbortSignal,
): Promise<number | undefined> {
  for (const [index, hold] of holds.entries()) {
    const heard = named.delete(hold.key);
    if (!heard && hold.leaseEnd - performance.now() >= ttlMs / 2) continue;
    // Within the call's bound, as its joins are (`timeoutMs` + the late-reply margin).
    // An aborted call stops retrying: its holds are given back.
    const renewing = renewed(acquirer, hold, ttlMs, Math.min(callEnd, hold.leaseEnd), signal);
    const kept = await settledBy(renewing, callEnd, signal, () => unansweredRenewal(hold.key));
    if (kept === undefined) return index;
    holds[index] = kept;
  }
  return undefined;
}

/**
 * `hold` with the lease its renewal gave, or undefined if the entry is gone or the answer came
 * after the lease had ended (it proves nothing then; see `LeaseKeeper`). Retried while it fails
 * in passing (MongoDB away, a refusal such as Interrupted) until `until`.
 */
async function renewed(
  acquirer: Renewer,
  hold: LineHold,
  ttlMs: number,
  until: number,
  signal: AbortSignal,
): Promise<LineHold | undefined> {
  const sentAt = performance.now();
  const renew = () => acquirer.renew(hold, ttlMs);
  const answer = await retriedUntil(renew, isPassingFailure, until, signal);
  if (!answer || performance.now() >= hold.leaseEnd) return undefined;
  return { ...hold, leaseEnd: localLeaseEnd(sentAt, answer.remainingMs, ttlMs) };
}

/** A hold's renewal before hand-out, unanswered by the end of the call's time. */
function unansweredRenewal(key: string): LockStoreUnavailableError {
  return new LockStoreUnavailableError(
    `MongoDB did not answer the renewal of ${quoteLockKey(key)} before its lock was handed out`,
  );
}
