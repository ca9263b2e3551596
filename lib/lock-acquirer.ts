import { randomUUID } from 'node:crypto';
import { LockNotAcquiredError } from './errors/lock-not-acquired.error';
import { MongoLockHandle } from './lock-handle';
import { notAcquiredMessage } from './lock.messages';
import type { ResolvedAcquireOptions } from './options';
import type { AcquireAttemptWon } from './store/acquire-attempt';
import type { LockStore } from './store/lock-store';
import type { WaitLogger } from './waiting/wait-logger';
import type { LockWaiting } from './waiting/lock-waiting';

export interface LockAcquirerDeps {
  waiting: LockWaiting;
  logger: WaitLogger;
  maxHoldMs: number;
  /** Handles not yet released, for shutdown and `releaseAllHeld()`. */
  held: Set<MongoLockHandle>;
}

/**
 * Turns keys into a held {@link MongoLockHandle}: one key at a time in sorted order, all
 * or nothing, waiting in the local queues when `timeoutMs > 0`.
 */
export class LockAcquirer {
  constructor(private readonly deps: LockAcquirerDeps) {}

  async acquire(
    store: LockStore,
    keys: string[],
    options: ResolvedAcquireOptions,
    signal: AbortSignal,
  ): Promise<MongoLockHandle> {
    const deadline = performance.now() + options.timeoutMs;
    const won: AcquireAttemptWon[] = [];
    try {
      for (const key of keys)
        won.push(await this.acquireKey(store, key, options, deadline, signal));
      signal.throwIfAborted();
      await this.refreshEarlierLeases(store, won, options);
    } catch (error) {
      await Promise.all([...won].reverse().map((taken) => this.releaseAbandoned(store, taken)));
      throw withAllKeys(error, keys, options.timeoutMs);
    }
    return this.createHandle(store, won, options);
  }

  /** Gives back a lock nobody will use (cancelled, or part of a failed multi-key acquisition). */
  async releaseAbandoned(store: LockStore, won: AcquireAttemptWon): Promise<void> {
    try {
      await store.release(won.key, won.owner);
      this.deps.waiting.notifyReleased(won.key);
    } catch (error) {
      // The lease runs out by itself; nothing else to do.
      this.deps.logger.warn(
        `Could not release abandoned lock ${JSON.stringify(won.key)}: ${String(error)}`,
      );
    }
  }

  private async acquireKey(
    store: LockStore,
    key: string,
    options: ResolvedAcquireOptions,
    deadline: number,
    signal: AbortSignal,
  ): Promise<AcquireAttemptWon> {
    // A fresh token per attempt: a reply lost to a network error leaves a token nobody reuses.
    const attempt = () => store.attempt(key, randomUUID(), options.ttlMs);
    if (options.timeoutMs > 0) {
      return this.deps.waiting.acquireKey(key, {
        attempt,
        deadline,
        timeoutMs: options.timeoutMs,
        signal,
      });
    }
    const outcome = await attempt();
    if (outcome.won) return outcome;
    const retryAfterMs = outcome.remainingMs;
    const holderId = outcome.holderId ?? undefined;
    throw new LockNotAcquiredError(notAcquiredMessage([key], 0, holderId, retryAfterMs), {
      keys: [key],
      retryAfterMs,
      holderId,
    });
  }

  /**
   * Keys taken early in a multi-key acquisition aged while the later ones were awaited.
   * Renew those with less than half a lease left before handing the lock out, so the
   * caller never starts work under a lease that is about to end (or already has).
   */
  private async refreshEarlierLeases(
    store: LockStore,
    won: AcquireAttemptWon[],
    options: ResolvedAcquireOptions,
  ): Promise<void> {
    for (const [index, taken] of won.entries()) {
      if (taken.sentAt + taken.remainingMs - performance.now() >= options.ttlMs / 2) continue;
      const renewal = await store.renew(taken.key, taken.owner, options.ttlMs);
      if (!renewal.renewed) {
        throw new LockNotAcquiredError(
          `${notAcquiredMessage([taken.key], options.timeoutMs, undefined, undefined)}: its ` +
            'lease ran out while the other keys were awaited',
          { keys: [taken.key] },
        );
      }
      won[index] = { ...taken, sentAt: renewal.sentAt, remainingMs: renewal.remainingMs };
    }
  }

  private createHandle(
    store: LockStore,
    won: AcquireAttemptWon[],
    options: ResolvedAcquireOptions,
  ): MongoLockHandle {
    const { waiting, held } = this.deps;
    const handle = new MongoLockHandle({
      held: won.map(({ key, owner, fence }) => ({ key, owner, fence })),
      leaseEnd: Math.min(...won.map((taken) => taken.sentAt + taken.remainingMs)),
      ttlMs: options.ttlMs,
      renew: options.renew,
      renewalIntervalRatio: options.renewalIntervalRatio,
      maxHoldMs: this.deps.maxHoldMs,
      operations: {
        renew: (key, ttlMs) => store.renew(key.key, key.owner, ttlMs),
        release: async (key) => {
          const outcome = await store.release(key.key, key.owner);
          // Even when lost: our hold ended, so local waiters should look again.
          waiting.notifyReleased(key.key);
          return outcome;
        },
      },
      onSettled: (settled) => held.delete(settled),
    });
    held.add(handle);
    return handle;
  }
}

/** A multi-key acquisition reports all its keys, with the blocking key's holder. */
function withAllKeys(error: unknown, keys: string[], timeoutMs: number): unknown {
  if (!(error instanceof LockNotAcquiredError) || keys.length === 1) return error;
  return new LockNotAcquiredError(
    notAcquiredMessage(keys, timeoutMs, error.holderId, error.retryAfterMs),
    { keys, retryAfterMs: error.retryAfterMs, holderId: error.holderId, cause: error },
  );
}
