import { Logger } from '@nestjs/common';
import { LockLostError, LockNotAcquiredError } from '../errors';
import type { WithLockOptions } from '../interfaces/lock-options.interface';
import { heldLocksOf } from '../lock-context';
import { type LockHandle, MongoLockHandle } from '../lock-handle';
import type { LockService } from '../lock.service';
import { MESSAGES } from '../mongo-lock.messages';
import { MAX_TIMER_MS } from '../util/timers';
import { documentLocksNamed } from '../documents/document-locks-registry';
import { documentLockContext } from './lock-bindings';
import { releasesUnderWay } from './releases-under-way';
import type { LockedMetadata } from './locked-metadata';
import { NOOP_LOCK_TELEMETRY, type LockTelemetry } from '../telemetry/lock-telemetry';

const logger = new Logger('MongoLockModule');

/** What {@link runLocked} resolves to when `onBusy: 'skip'` found the lock held. */
export const SKIPPED: unique symbol = Symbol('MONGO_LOCK:SKIPPED');

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
 * Runs `work` under the lock on `keys` through `withLock`, plus what only the decorator adds:
 * - `onBusy: 'skip'`: the acquisition's `LockNotAcquiredError` (never `work`'s) resolves to
 *   {@link SKIPPED}, logged at debug level;
 * - `@LockedDocument`: locks document `keys[0]` through its collection's `DocumentLocks`;
 * - `minHoldMs`: see {@link holdAtLeast}; not on re-entry, where the lock is the outer holder's.
 */
export async function runLocked<T>(
  lockService: LockService,
  keys: string[],
  metadata: LockedMetadata,
  work: (lockSignal: AbortSignal) => Promise<T>,
  signal?: AbortSignal,
  scope?: string,
): Promise<T | typeof SKIPPED> {
  const { options, where } = metadata;
  // A LockService replaced in tests (overrideProvider) may have no telemetry.
  const telemetry = (lockService.telemetry as LockTelemetry | undefined) ?? NOOP_LOCK_TELEMETRY;
  const traced = (lockSignal: AbortSignal) =>
    telemetry.lockedMethod(metadata.metricsLabel, where, () => work(lockSignal));
  let started = false;
  // Unless re-entering (an enclosing lock holds one of the keys: its release waits for us).
  const releasing = releasesUnderWay(lockService, keys);
  const reenters = () => heldLocksOf(lockService).some((h) => keys.some((k) => h.keys.includes(k)));
  if (releasing && !reenters()) await releasing;
  try {
    if (metadata.document) {
      const { name, where: filter, createIfMissing } = metadata.document;
      const documents = documentLocksNamed(lockService, name, where);
      return await documents.withLock(
        keys[0],
        (handle) => {
          started = true;
          return documentLockContext.run(handle, () => traced(handle.signal));
        },
        { ...acquireOptions(metadata, signal, undefined), where: filter, createIfMissing },
      );
    }
    // Re-entered (or refused as a deadlock): the handle is a view of the outer holder's lock.
    const reentered = reenters();
    return await lockService.withLock(
      keys,
      (handle) => {
        started = true;
        const run = () => traced(handle.signal);
        if (!options.minHoldMs || reentered) return run();
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
 * Runs `work`; if `minHoldMs` has not passed since the grant, one owner-checked renew per key
 * sets the lease to end `minHoldMs` after it and lets it run out (the handle counts as done:
 * `withLock` releases nothing). Timed from `work`'s call, after the grant's reply, so never
 * short. On success or failure; `work`'s own error wins.
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
  if (remainingMs <= 0 || handle.lost || handle.released || !(handle instanceof MongoLockHandle))
    return;
  // In a transaction (still open): a write now would conflict with its check, and the work run
  // again. The release after the commit lets the lease run out instead.
  if (handle.session) return handle.expireAtRelease(heldUntil);
  try {
    await handle.expireIn(remainingMs);
  } catch (error) {
    if (error instanceof LockLostError) throw error;
    // The work is done; only the shortening is unconfirmed. The lease ends when it would have.
    logger.warn(MESSAGES.minHoldNotKept(where, handle.key, error));
  }
}
