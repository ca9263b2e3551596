import { Logger } from '@nestjs/common';
import { LockLostError, LockNotAcquiredError } from '../errors';
import type { WithLockOptions } from '../interfaces/lock-options.interface';
import { heldLocksOf } from '../lock-context';
import type { LockHandle } from '../lock-handle';
import type { LockService } from '../lock.service';
import { MESSAGES } from '../mongo-lock.messages';
import { MAX_TIMER_MS } from '../options';
import { documentLocksNamed } from '../documents/document-locks-registry';
import { runWithDocumentLock } from './document-lock-context';
import type { LockedMetadata } from './locked-metadata';
import { NOOP_LOCK_TELEMETRY, type LockTelemetry } from '../telemetry/lock-telemetry';

const logger = new Logger('MongoLockModule');

/** What {@link runLocked} resolves to when `onBusy: 'skip'` found the lock held. */
export const SKIPPED: unique symbol = Symbol('MONGO_LOCK:SKIPPED');

/** A handle that can end its hold by letting the lease run out (`MongoLockHandle`). */
interface ExpirableHandle extends LockHandle {
  expireIn(ttlMs: number): Promise<void>;
}

function canExpire(handle: LockHandle): handle is ExpirableHandle {
  return typeof (handle as Partial<ExpirableHandle>).expireIn === 'function';
}

/** `@Locked` options as `withLock` takes them: `'skip'` makes one attempt unless told otherwise. */
function acquireOptions(
  { options, metricsLabel }: LockedMetadata,
  signal: AbortSignal | undefined,
  scope: string | undefined,
): WithLockOptions {
  const { ttlMs, renew, onBusy, transaction, mode, permits, weight } = options;
  const timeoutMs = options.timeoutMs ?? (onBusy === 'skip' ? 0 : undefined);
  const form = { mode, permits, weight };
  return { ttlMs, timeoutMs, renew, signal, metricsLabel, transaction, scope, ...form };
}

/**
 * Runs `work` under the lock on `keys` with the `@Locked` options in `metadata`: through
 * `withLock` (renewal, re-entrancy, release), plus what only the decorator offers:
 * - `onBusy: 'skip'`: a lock held elsewhere resolves to {@link SKIPPED} instead of failing,
 *   logged at debug level. Only the acquisition's `LockNotAcquiredError` is turned into a
 *   skip, never one thrown by `work`.
 * - `@LockedDocument` (`metadata.document`): the lock is on the document `keys[0]` of the
 *   registered collection, through its `DocumentLocks.withLock` (a committed lock is not
 *   released again); `work` runs with the handle as the current document lock.
 * - `minHoldMs`: see {@link holdAtLeast}. Not applied when the call re-enters a lock that the
 *   call chain already holds: that lock belongs to the outer holder.
 */
export async function runLocked<T>(
  lockService: LockService,
  keys: string[],
  metadata: LockedMetadata,
  /** Called under the lock with the lock's signal (it aborts when the lock is lost). */
  work: (lockSignal: AbortSignal) => Promise<T>,
  signal?: AbortSignal,
  /** The call's owner scope, rendered from `LockedOptions.scope`. */
  scope?: string,
): Promise<T | typeof SKIPPED> {
  const { options, where } = metadata;
  // A LockService replaced in tests (overrideProvider) may have no telemetry.
  const telemetry = (lockService.telemetry as LockTelemetry | undefined) ?? NOOP_LOCK_TELEMETRY;
  const traced = (lockSignal: AbortSignal) =>
    telemetry.lockedMethod(metadata.metricsLabel, where, () => work(lockSignal));
  let started = false;
  try {
    if (metadata.document) {
      const { name, where: filter, createIfMissing } = metadata.document;
      const documents = documentLocksNamed(lockService, name, where);
      return await documents.withLock(
        keys[0],
        (handle) => {
          started = true;
          return runWithDocumentLock(handle, () => traced(handle.signal));
        },
        { ...acquireOptions(metadata, signal, undefined), where: filter, createIfMissing },
      );
    }
    const enclosing = new Set(heldLocksOf(lockService));
    return await lockService.withLock(
      keys,
      (handle) => {
        started = true;
        const run = () => traced(handle.signal);
        if (!options.minHoldMs || enclosing.has(handle)) return run();
        return holdAtLeast(handle, options.minHoldMs, where, run);
      },
      acquireOptions(metadata, signal, scope),
    );
  } catch (error) {
    if (!started && options.onBusy === 'skip' && error instanceof LockNotAcquiredError) {
      logger.debug(MESSAGES.skippedBusy(where, error.keys));
      return SKIPPED;
    }
    throw error;
  }
}

/**
 * Runs `work`, then, if less than `minHoldMs` has passed since the lock was taken, does not
 * release it: one owner-checked renew per key sets the lease to end `minHoldMs` after the
 * acquisition, and the lease is left to run out (the handle counts as done, so `withLock`'s
 * release sends nothing). The time is counted from when `work` was called, just after the
 * acquisition's reply, so the lease never ends sooner than `minHoldMs` after the server
 * granted it. Applies whether `work` succeeded or failed; `work`'s own error always wins.
 */
async function holdAtLeast<T>(
  handle: LockHandle,
  minHoldMs: number,
  where: string,
  work: () => Promise<T>,
): Promise<T> {
  const heldUntil = performance.now() + minHoldMs;
  let result: T;
  try {
    result = await work();
  } catch (error) {
    await leaveToExpire(handle, heldUntil, where).catch(() => undefined);
    throw error;
  }
  await leaveToExpire(handle, heldUntil, where);
  return result;
}

async function leaveToExpire(handle: LockHandle, heldUntil: number, where: string): Promise<void> {
  const remainingMs = Math.min(Math.ceil(heldUntil - performance.now()), MAX_TIMER_MS);
  // Held long enough, or nothing to keep: withLock releases (or reports the loss) as usual.
  if (remainingMs <= 0 || handle.lost || handle.released || !canExpire(handle)) return;
  try {
    await handle.expireIn(remainingMs);
  } catch (error) {
    if (error instanceof LockLostError) throw error;
    // The work is done; only the shortening is unconfirmed. The lease ends when it would have.
    logger.warn(MESSAGES.minHoldNotKept(where, handle.key, error));
  }
}
