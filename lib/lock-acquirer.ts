import { DocumentNotFoundError } from './errors/document-not-found.error';
import { InvalidLockOptionsError } from './errors/invalid-lock-options.error';
import { LockNotAcquiredError } from './errors/lock-not-acquired.error';
import { holderCapError } from './store/lock-mode-errors';
import type { HeldLocks } from './held-locks';
import { leaseSafetyMarginMs, localLeaseEnd } from './lease-keeper';
import type { HandableLease, HeldKey } from './lease-keeper';
import { MongoLockHandle } from './lock-handle';
import { notAcquiredMessage } from './lock.messages';
import { acquireOverrunMs, type ResolvedAcquireOptions } from './options';
import type {
  AcquireAttemptOutcome,
  AcquireAttemptWon,
  AttemptTarget,
} from './store/acquire-attempt';
import type { LockStore } from './store/lock-store';
import { isStoreUnavailableError } from './store/mongo-error-codes';
import { GRANT_LEASE_MS, lastReservedFence } from './store/direct-grant';
import { EXCLUSIVE, newOwnerToken } from './store/lock-modes';
import type { ReservationUse } from './store/lock-modes';
import type { ReleaseLeaseOutcome, ReleaseResult } from './store/release-lease';
import type { KeyAttempts, OfferedSuccessor } from './waiting/key-queue';
import type { LockWaiting } from './waiting/lock-waiting';
import { settlesWithin } from './util/timers';

export interface LockAcquirerDeps {
  waiting: LockWaiting;
  maxHoldMs: number;
  /** Where handed-out handles are kept until released or lost. */
  held: HeldLocks;
  /** The longest one command may take: how long a failed call waits for its give-backs. */
  operationTimeoutMs: number;
  /** This process's holder id: a release that hands the key to it wakes local waiters. */
  holderId: string;
  /**
   * A release may pass an exclusive lock to a caller waiting in this process, in the same
   * write (where the store supports it: the lock collection).
   */
  localTransfers: boolean;
}

/**
 * The attempts of one acquisition call. One owner token serves every attempt and every key,
 * so a retry recognises a win whose reply was lost, and a call that gives up can release, by
 * token, whatever an attempt of unknown outcome may have taken.
 */
class Acquisition implements KeyAttempts {
  /** Its form says where the lease lives: the document's own, or a holder entry. */
  readonly owner: string;
  /** Keys an attempt with no reply may have taken; made on the first (most calls have none). */
  private uncertain: Set<string> | undefined;
  private ended = false;

  constructor(
    readonly store: LockStore,
    private readonly ttlMs: number,
    private readonly giveBack: (
      key: string,
      owner: string,
      unlessClaimed?: boolean,
      fence?: bigint,
      leaveLine?: boolean,
    ) => unknown,
    /** When to send the second release of an attempt with no reply: one command's time. */
    private readonly laterMs: number,
    /** How long the next command may take: what is left of the call's time, at most one command's. */
    readonly commandBudgetMs: () => number,
    private readonly target: AttemptTarget | undefined,
  ) {
    this.owner = newOwnerToken(target?.mode ?? EXCLUSIVE);
  }

  attempt(
    key: string,
    reservation?: string,
    reservationUse?: ReservationUse,
  ): Promise<AcquireAttemptOutcome> {
    const onLateWin = () => {
      // While the call goes on, its next attempt recognises the win (same token).
      if (this.ended) void this.giveBack(key, this.owner, true);
      else (this.uncertain ??= new Set()).add(key);
    };
    const attempt = this.store.attempt(
      key,
      this.owner,
      this.ttlMs,
      onLateWin,
      this.commandBudgetMs(),
      this.target,
      reservation,
      reservationUse,
    );
    return attempt.catch((error: unknown) => {
      // A document that is not there, a key in use in another form or with all its holders:
      // the server answered, and nothing was written.
      const answered =
        error instanceof DocumentNotFoundError ||
        error instanceof InvalidLockOptionsError ||
        error instanceof LockNotAcquiredError;
      if (answered) throw error;
      // No reply: the write may have happened.
      this.markUncertain(key);
      throw error;
    });
  }

  /** The queue for `key` left this process's place in the key's line. */
  withdraw(key: string, reservation: string, exceptGrant?: string): void {
    this.store.withdraw(key, reservation, exceptGrant);
  }

  /** The queue for `key` keeps its place in the key's line (see `KeyAttempts.keepPlace`). */
  keepPlace(key: string, reservation: string): Promise<number | undefined> {
    return this.store.keepPlace(key, reservation);
  }

  /** An attempt won after its caller had left (cancelled mid-attempt): give it back. */
  abandonWin(won: AcquireAttemptWon): void {
    void this.giveBack(won.key, won.owner, false, won.fence);
  }

  /**
   * A command that may have given us `key` got no reply (a local transfer's release): if the
   * call fails, what it may hold there is given back.
   */
  markUncertain(key: string): void {
    if (this.ended) this.giveBackUncertain(key);
    else (this.uncertain ??= new Set()).add(key);
  }

  /** The call succeeded: its attempts are over, every key is held. */
  succeed(): void {
    this.ended = true;
  }

  /**
   * The call failed: gives back what it took, each by the token it was won with (a caller
   * handed the lock without a write holds it by its predecessor's), and what it may have taken.
   */
  abandon(won: readonly AcquireAttemptWon[]): Promise<unknown> {
    this.ended = true;
    // A key won by another token (handed over within a lease) may also hold a win of ours.
    for (const key of this.uncertain ?? []) {
      if (!won.some((taken) => taken.key === key && taken.owner === this.owner)) {
        this.giveBackUncertain(key);
      }
    }
    return Promise.all(
      [...won]
        .reverse()
        .map((taken) =>
          this.giveBack(taken.key, taken.owner, false, taken.fence, taken.leavesLine),
        ),
    );
  }

  /**
   * An attempt with no reply may still reach the server after our release does (it was on
   * its way when its connection failed): release once now and once more a command's time
   * later. Releases by token are idempotent.
   */
  private giveBackUncertain(key: string): void {
    void this.giveBack(key, this.owner);
    const later = setTimeout(() => void this.giveBack(key, this.owner), this.laterMs);
    later.unref();
  }
}

/**
 * Turns keys into a held {@link MongoLockHandle}: one key at a time in sorted order, all
 * or nothing, waiting in the local queues when `timeoutMs > 0`.
 */
export class LockAcquirer {
  constructor(private readonly deps: LockAcquirerDeps) {}

  acquire(
    store: LockStore,
    keys: string[],
    options: ResolvedAcquireOptions,
    signal: AbortSignal,
    /** When the caller asked (before a lazy start, say): the call's time counts from here. */
    startedAt = performance.now(),
  ): Promise<MongoLockHandle> {
    return this.acquireWon(store, keys, options, signal, startedAt).then(({ handle }) => handle);
  }

  /**
   * {@link acquire}, with what the winning attempts returned (a document lock's document),
   * for attempts that must also meet `target`.
   */
  acquireWon(
    store: LockStore,
    keys: string[],
    options: ResolvedAcquireOptions,
    signal: AbortSignal,
    startedAt = performance.now(),
    target?: AttemptTarget,
  ): Promise<{ handle: MongoLockHandle; won: readonly AcquireAttemptWon[] }> {
    const deadline = startedAt + options.timeoutMs;
    // The whole call, every key and command included, settles by then: what it waits for is
    // `timeoutMs`, plus a short while for the reply of an attempt still on its way.
    const callEnd = deadline + acquireOverrunMs(this.deps.operationTimeoutMs);
    const commandBudgetMs = () =>
      Math.max(1, Math.min(this.deps.operationTimeoutMs, callEnd - performance.now()));
    const acquisition = new Acquisition(
      store,
      options.ttlMs,
      (key, owner, unlessClaimed, fence, leaveLine) =>
        this.giveBack(store, key, owner, { unlessClaimed, fence, leaveLine }),
      this.deps.operationTimeoutMs,
      commandBudgetMs,
      {
        ...target,
        mode: options.mode,
        ...(options.scope === undefined ? {} : { scope: options.scope }),
      },
    );
    const won: AcquireAttemptWon[] = [];
    const fail = async (error: unknown): Promise<never> => {
      const givingBack = acquisition.abandon(won);
      // Usually quick; what is not done by the call's end goes on in the background.
      await settlesWithin(givingBack, callEnd - performance.now());
      throw withAllKeys(error, keys, options.timeoutMs);
    };
    // Only `takeKeys` stays suspended while the call waits: a small frame per waiter.
    return this.takeKeys(acquisition, keys, won, options, deadline, signal).then(() => {
      // Shutdown may have begun meanwhile: it hands out no new lock.
      if (signal.aborted) return fail(signal.reason);
      acquisition.succeed();
      return { handle: this.createHandle(store, won, options), won };
    }, fail);
  }

  /** Takes `keys` in order into `won`; on failure `won` holds what was taken so far. */
  private async takeKeys(
    acquisition: Acquisition,
    keys: string[],
    won: AcquireAttemptWon[],
    options: ResolvedAcquireOptions,
    deadline: number,
    signal: AbortSignal,
  ): Promise<void> {
    for (;;) {
      for (let next = won.length; next < keys.length; next++) {
        const taken = await this.acquireKey(acquisition, keys[next], options, deadline, signal);
        won.push(taken);
        // A grant handed out without a write has only the short grant lease: confirmed now, not
        // left to lapse while the later keys are awaited. Lost meanwhile: wait for it again.
        // No reply: left to `refreshEarlierLeases` and the handle, as the last key's is.
        if (taken.grantUnconfirmed && next < keys.length - 1) {
          const confirmed = await this.renewWon(acquisition, taken, options).catch(
            (error: unknown) => {
              if (isStoreUnavailableError(error)) return taken;
              throw error;
            },
          );
          if (confirmed) {
            won[next] = confirmed;
          } else {
            won.pop();
            next--;
            this.notifyEnded(taken.key, undefined);
          }
        }
      }
      signal.throwIfAborted();
      const lost = await this.refreshEarlierLeases(acquisition, won, options);
      if (lost === undefined) break;
      // A stall (a long pause, a frozen process) outlived a lease before the lock was handed
      // out, so nothing was protected yet: wait for that key again while time remains, and
      // for the later ones after it, to keep taking keys in order.
      if (performance.now() >= deadline) throw leaseRanOut(won[lost].key, options.timeoutMs);
      const later = won.splice(lost);
      await Promise.all(
        later.map((taken) =>
          this.giveBack(acquisition.store, taken.key, taken.owner, {
            fence: taken.fence,
            leaveLine: taken.leavesLine,
          }),
        ),
      );
    }
  }

  /**
   * Gives back a lock nobody will use (its waiter left, or its call failed); `unlessClaimed`:
   * a late win, given back only if no attempt of its call handed it out meanwhile. `fence`:
   * the lease's, when known (see `recognisedRelease`). `leaveLine`: a grant handed out with
   * our place in line, never confirmed (`AcquireAttemptWon.leavesLine`).
   */
  giveBack(
    store: LockStore,
    key: string,
    owner: string,
    {
      unlessClaimed = false,
      fence,
      leaveLine,
    }: { unlessClaimed?: boolean; fence?: bigint; leaveLine?: boolean } = {},
  ): Promise<ReleaseLeaseOutcome | undefined> {
    const releasing = unlessClaimed
      ? store.giveBackUnclaimed(key, owner)
      : store.giveBack(key, owner, fence, leaveLine);
    return releasing.then((result) => {
      this.notifyEnded(key, result);
      return result?.outcome;
    });
  }

  private acquireKey(
    acquisition: Acquisition,
    key: string,
    options: ResolvedAcquireOptions,
    deadline: number,
    signal: AbortSignal,
  ): Promise<AcquireAttemptWon> {
    if (options.timeoutMs > 0) {
      return this.deps.waiting.acquireKey(key, {
        attempts: acquisition,
        deadline,
        timeoutMs: options.timeoutMs,
        signal,
        ...(this.deps.localTransfers && isTransferable(options)
          ? {
              transfer: {
                owner: acquisition.owner,
                ttlMs: options.ttlMs,
                scope: options.scope ?? null,
                uncertain: () => acquisition.markUncertain(key),
              },
            }
          : {}),
      });
    }
    return acquisition.attempt(key).then((outcome) => {
      if (outcome.won) return outcome;
      const retryAfterMs = outcome.remainingMs;
      if (outcome.atHolderCap) throw holderCapError(key, retryAfterMs);
      const holderId = outcome.holderId ?? undefined;
      throw new LockNotAcquiredError(notAcquiredMessage([key], 0, holderId, retryAfterMs), {
        keys: [key],
        retryAfterMs,
        holderId,
      });
    });
  }

  /**
   * Renews a key taken by this call (which confirms a grant handed out without a write);
   * undefined if its lease was lost.
   */
  private async renewWon(
    acquisition: Acquisition,
    taken: AcquireAttemptWon,
    options: ResolvedAcquireOptions,
  ): Promise<AcquireAttemptWon | undefined> {
    const renewal = await acquisition.store.renew(
      taken.key,
      taken.owner,
      options.ttlMs,
      acquisition.commandBudgetMs(),
      taken.leavesLine,
    );
    if (!renewal.renewed) return undefined;
    const { grantUnconfirmed: _confirmed, leavesLine: _left, ...confirmed } = taken;
    return { ...confirmed, sentAt: renewal.sentAt, remainingMs: renewal.remainingMs };
  }

  /**
   * Keys taken early in a multi-key acquisition aged while the later ones were awaited (and
   * any key does across a stall before the hand-out). Renew those with less than half a lease
   * left before handing the lock out, so the caller never starts work under a lease that is
   * about to end. Returns the index of the first whose lease has already ended, if any.
   */
  private async refreshEarlierLeases(
    acquisition: Acquisition,
    won: AcquireAttemptWon[],
    options: ResolvedAcquireOptions,
  ): Promise<number | undefined> {
    for (const [index, taken] of won.entries()) {
      // A grant handed out without a write is confirmed by the handle's first renewal, sent
      // at once; only one about to run out is renewed before the hand-out.
      const enough = taken.grantUnconfirmed ? GRANT_LEASE_MS / 4 : options.ttlMs / 2;
      if (taken.sentAt + taken.remainingMs - performance.now() >= enough) continue;
      const renewed = await this.renewWon(acquisition, taken, options);
      if (!renewed) return index;
      won[index] = renewed;
    }
    return undefined;
  }

  private createHandle(
    store: LockStore,
    won: AcquireAttemptWon[],
    options: ResolvedAcquireOptions,
  ): MongoLockHandle {
    // Only an unscoped exclusive lease has a block of fences to hand on: `releaseScope` may
    // free a scoped lease behind its holder's back, which only a release write would notice.
    const handsOver =
      this.deps.localTransfers && isTransferable(options) && options.scope === undefined;
    // Keys whose place in line goes with the grant's confirmation: until that is known to have
    // landed, a release or give-back drops the place first (else it would grant the key back
    // to it, where nobody waits any more).
    const leavingLine = new Set(won.filter((taken) => taken.leavesLine).map(({ key }) => key));
    const placeLeft = async (held: HeldKey) => {
      if (leavingLine.delete(held.key)) await store.withdrawGrantedPlace(held.key, held.owner);
    };
    const handle = new MongoLockHandle({
      scope: options.scope,
      mode: options.mode,
      held: won.map(({ key, owner, fence, fenceBlockEnd }) => ({
        key,
        owner,
        fence,
        ...(handsOver ? { fenceBlockEnd: fenceBlockEnd ?? lastReservedFence(fence) } : {}),
      })),
      leaseEnd: Math.min(
        ...won.map((taken) => localLeaseEnd(taken.sentAt, taken.remainingMs, options.ttlMs)),
      ),
      ttlMs: options.ttlMs,
      renew: options.renew,
      renewAtOnce: won.some((taken) => taken.grantUnconfirmed),
      renewalIntervalRatio: options.renewalIntervalRatio,
      maxHoldMs: options.maxHoldMs ?? this.deps.maxHoldMs,
      operations: {
        // Only the confirming renewal of a grant can drop its place (see `renewLease`).
        renew: async (held, ttlMs) => {
          const renewal = await store.renew(
            held.key,
            held.owner,
            ttlMs,
            undefined,
            leavingLine.has(held.key),
          );
          if (renewal.renewed) leavingLine.delete(held.key);
          return renewal;
        },
        release: async (held, lease) => {
          await placeLeft(held);
          return this.release(store, held, lease);
        },
        giveBack: async (held) => {
          await placeLeft(held);
          return this.giveBack(store, held.key, held.owner, { fence: held.fence });
        },
        ended: (held) => store.forget(held.key, held.owner),
      },
    });
    this.deps.held.add(handle);
    return handle;
  }

  /**
   * Releases a held key, passing it to the caller first in line here when there is one: within
   * the lease, without a write, when it allows (see {@link handOverInLease}); else by a local
   * transfer (one write). Tells the local waiters how the hold ended.
   */
  private async release(
    store: LockStore,
    held: HeldKey,
    lease: HandableLease | undefined,
  ): Promise<ReleaseLeaseOutcome> {
    const successor = this.deps.waiting.takeSuccessor(held.key);
    const inLease = successor && lease && store.handsOverInLease;
    if (inLease && this.handOverInLease(held, lease, successor)) return 'released';
    const local = successor && { ...successor.target, holder: this.deps.holderId };
    let result: ReleaseResult;
    try {
      // A transfer that lands after we stopped waiting sends no event: look again then.
      result = await store.release(held.key, held.owner, {
        fence: held.fence,
        successor: local,
        onLateOutcome: () => this.notifyEnded(held.key, undefined),
      });
    } catch (error) {
      // Perhaps applied: the successor may hold the key, and local waiters must not keep
      // assuming we do.
      successor?.target.uncertain();
      successor?.declined();
      this.notifyEnded(held.key, undefined);
      throw error;
    }
    if (successor && result.transferred) {
      successor.transferred({
        key: held.key,
        owner: successor.target.owner,
        fence: result.transferred.fence,
        holderId: this.deps.holderId,
        sentAt: result.transferred.sentAt,
        remainingMs: successor.target.ttlMs,
        operationTime: undefined,
        won: true,
      });
    } else {
      successor?.declined();
      this.notifyEnded(held.key, result);
    }
    return result.outcome;
  }

  /**
   * Hands an unscoped key to `successor` without a write, if the lease allows: a fence of the
   * lease's block is left, the successor is unscoped too, asks for no longer a lease (so that a
   * late renewal of ours cannot shorten its own), and has at least half its `ttlMs` left before
   * the local deadline. It then holds the key by the same owner token, lease and local
   * deadline, and renews it from then on. Only an unscoped lease has a block of fences.
   */
  private handOverInLease(
    held: HeldKey,
    lease: HandableLease,
    successor: OfferedSuccessor,
  ): boolean {
    const { target } = successor;
    const now = performance.now();
    const fenceLeft = held.fenceBlockEnd !== undefined && held.fence < held.fenceBlockEnd;
    const fits = target.ttlMs <= lease.ttlMs && lease.end - now >= target.ttlMs / 2;
    if (!fenceLeft || target.scope !== null || !fits) return false;
    successor.transferred({
      key: held.key,
      owner: held.owner,
      fence: held.fence + 1n,
      fenceBlockEnd: held.fenceBlockEnd,
      holderId: this.deps.holderId,
      sentAt: now,
      // So that its local deadline (see `localLeaseEnd`) is ours.
      remainingMs: lease.end - now + leaseSafetyMarginMs(target.ttlMs),
      operationTime: undefined,
      won: true,
    });
    return true;
  }

  /**
   * Our hold of `key` ended (by a release or a give-back, whose `result` says where the lock
   * went; undefined when unknown): local waiters look again at once, without waiting for the
   * stream, unless the write handed the lock to another process. A grant to this process is
   * taken by the small confirming command, as one heard on the stream.
   */
  private notifyEnded(key: string, result: ReleaseResult | undefined): void {
    const freed = result?.outcome === 'released' || result?.outcome === 'expired';
    if (freed && result.grantedTo !== undefined) {
      const here = result.grantedTo === this.deps.holderId;
      const how = here ? 'granted-here' : 'granted-elsewhere';
      this.deps.waiting.notifyHoldEnded(key, how, result.grantFence);
    } else {
      this.deps.waiting.notifyHoldEnded(key, freed ? 'freed' : 'lost');
    }
  }
}

/** A lock a release may pass to a caller waiting here: exclusive, one holder. */
function isTransferable(options: ResolvedAcquireOptions): boolean {
  return options.mode.mode === 'exclusive' && !options.mode.permits;
}

/** A multi-key acquisition reports all its keys, with the blocking key's holder. */
export function withAllKeys(error: unknown, keys: string[], timeoutMs: number): unknown {
  if (!(error instanceof LockNotAcquiredError) || keys.length === 1) return error;
  return new LockNotAcquiredError(
    notAcquiredMessage(keys, timeoutMs, error.holderId, error.retryAfterMs),
    { keys, retryAfterMs: error.retryAfterMs, holderId: error.holderId, cause: error },
  );
}

function leaseRanOut(key: string, timeoutMs: number): LockNotAcquiredError {
  return new LockNotAcquiredError(
    `${notAcquiredMessage([key], timeoutMs, undefined, undefined)}: its lease ran out before ` +
      'the lock was handed out',
    { keys: [key] },
  );
}
