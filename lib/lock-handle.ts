import type { ClientSession } from 'mongodb';
import { Observable, ReplaySubject } from 'rxjs';
import { LockLostError } from './errors/lock-lost.error';
import { MongoLockError } from './errors/mongo-lock.error';
import { LeaseKeeper } from './lease-keeper';
import type { HeldKey, LeaseKeeperInit } from './lease-keeper';
import { lostMessage } from './lock.messages';
import { validateTtlMs } from './options';
import { MAX_TIMER_MS } from './util/timers';
import { EXCLUSIVE } from './store/lock-modes';
import type { LockModeRequest } from './store/lock-modes';
import { checkedAtEveryLook } from './util/checked-signal';
import type { LockHandle } from './interfaces/lock-handle.interface';

export type { LockHandle };

const RELEASED_TOO_LATE = 'its lease had ended or another holder had taken it before release';
/** A retried release found no entry: the unconfirmed one may have landed, or it ended before. */
const UNCONFIRMED_RELEASE_FOUND_NONE = `a release MongoDB did not confirm may have landed, or ${RELEASED_TOO_LATE}`;

const releasedInTransaction = (named: string) =>
  new MongoLockError(`${named} cannot be released inside its transaction: its end releases it`);

/** The lease keeper's inputs, less `onLost` (the handle's own). */
export type LockHandleInit = Omit<LeaseKeeperInit, 'onLost'> & {
  scope?: string;
  /** How the keys are held; exclusive when absent. */
  mode?: LockModeRequest;
};

/** The {@link LockHandle} that `LockService` hands out. */
export class MongoLockHandle implements LockHandle {
  readonly key: string;
  readonly keys: readonly string[];
  readonly fence: bigint;
  readonly fences: ReadonlyMap<string, bigint>;
  readonly lost$: Observable<LockLostError>;
  readonly mode: 'exclusive' | 'shared';
  readonly permits: { of: number; held: number } | undefined;
  /** The session of the transaction the protected work runs in, set by `runInTransaction`. */
  session: ClientSession | undefined;
  /**
   * How messages name the lock, when not by its key: a document lock's names its document
   * (`Document "a" of "orders"`), set as it is handed out. @internal
   */
  subject: string | undefined;
  /** Resolves once the handle holds nothing any more: released, lost, or left to a give-back. */
  readonly done: Promise<void>;
  private readonly abortController = new AbortController();
  private readonly lostSubject = new ReplaySubject<LockLostError>(1);
  private readonly keeper: LeaseKeeper;
  private lostError: LockLostError | undefined;
  private releasing: Promise<void> | undefined;
  private isReleased = false;
  /** A release was sent (perhaps unconfirmed): the lock is being given up, not kept. */
  private releaseSent = false;
  private releaseConfirmed = false;
  /** The background release of a lost handle's keys, with how many were live. */
  private givingBack: Promise<number> | undefined;
  /** Why a release was not confirmed, while its give-back in the background goes on. */
  private unconfirmed: Error | undefined;
  /** Set by {@link expireAtRelease}: the monotonic time until which `release()` keeps the lease. */
  private keptUntil: number | undefined;
  private markDone!: () => void;

  constructor(private readonly init: LockHandleInit) {
    this.keys = init.held.map((held) => held.key);
    this.key = this.keys[0];
    this.fences = new Map(init.held.map((held) => [held.key, held.fence]));
    this.fence = init.held[0].fence;
    this.lost$ = this.lostSubject.asObservable();
    const mode = init.mode ?? EXCLUSIVE;
    this.mode = mode.mode;
    this.permits = mode.permits === undefined ? undefined : { of: mode.permits, held: mode.weight };
    this.done = new Promise((resolve) => (this.markDone = resolve));
    this.keeper = new LeaseKeeper({
      ...init,
      onLost: (key, reason, cause) => this.markLost(key, reason, cause),
    });
    checkedAtEveryLook(this.abortController.signal, () => this.keeper.checkDeadline());
  }

  get expiresAt(): Date {
    return new Date(Date.now() + (this.keeper.leaseEnd - performance.now()));
  }

  /** Each look checks the local deadline: after a pause past it, aborted before its timer runs. */
  get signal(): AbortSignal {
    return this.abortController.signal;
  }

  get released(): boolean {
    return this.isReleased;
  }

  get lost(): boolean {
    this.keeper.checkDeadline();
    return this.lostError !== undefined;
  }

  get lostReason(): LockLostError | undefined {
    return this.lostError;
  }

  async extend(ttlMs?: number): Promise<void> {
    const released = () => new MongoLockError(`${this.named} was released; it cannot be extended`);
    if (this.lostError) throw this.lostError;
    if (this.isReleased || this.releasing || this.releaseSent) throw released();
    if (this.session) {
      // A write of the lock outside the transaction would conflict with its check: rerun.
      throw new MongoLockError(
        `Lock ${JSON.stringify(this.key)} cannot be extended inside its transaction: ` +
          'the lease was renewed in full when it began, and the work must fit in it',
      );
    }
    const lease = ttlMs === undefined ? undefined : validateTtlMs('ttlMs', ttlMs);
    const renewed = await this.keeper.renewNow(lease);
    this.throwIfLost();
    // Released (or committed) while an earlier renewal was answered: nothing was renewed.
    if (!renewed) throw released();
  }

  release(): Promise<void> {
    // Its write would conflict with the check, and the work run again unlocked: its end releases.
    if (this.session?.inTransaction()) {
      return Promise.reject(this.lostError ?? releasedInTransaction(this.named));
    }
    const keptMs = this.keptUntil === undefined ? 0 : this.keptUntil - performance.now();
    this.keptUntil = undefined;
    if (keptMs > 0 && !this.isReleased && !this.lostError && !this.releasing) {
      return this.expireIn(keptMs);
    }
    if (this.isReleased) {
      return this.lostError && !this.releaseConfirmed
        ? Promise.reject(this.lostError)
        : Promise.resolve();
    }
    if (this.lostError && !this.releasing) {
      // Nothing left to protect: tidy up in the background, answer at once.
      void this.giveBackUnreleased();
      return Promise.reject(this.lostError);
    }
    if (this.unconfirmed) return Promise.reject(this.unconfirmed);
    this.releasing ??= this.releaseOnce().finally(() => {
      this.releasing = undefined;
    });
    return this.releasing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }

  /**
   * Lets the lease run out instead of releasing (`@Locked`'s `minHoldMs`): an owner-checked renew
   * per key makes it end `ttlMs` from now by the server clock, even if sooner. Renewal stops and
   * the handle counts as released (`release()` sends nothing); the keys stay taken. Rejects with
   * {@link LockLostError} if lost, or the store's error if unconfirmed (the lease then ends at
   * `ttlMs` or when it would have); either way the handle holds nothing any more.
   */
  expireIn(ttlMs: number): Promise<void> {
    if (this.lostError) return Promise.reject(this.lostError);
    if (this.isReleased || this.releasing) {
      return Promise.reject(new MongoLockError(`${this.named} is already being released`));
    }
    const leaseMs = Math.min(Math.max(1, Math.ceil(ttlMs)), MAX_TIMER_MS);
    // Shared with release(): a release asked for meanwhile waits for this and sends nothing.
    this.releasing = this.expireOnce(leaseMs).finally(() => {
      this.releasing = undefined;
    });
    return this.releasing;
  }

  /**
   * Makes the next `release()` let the lease run out at `until` (monotonic ms) instead, as
   * {@link expireIn} would then: `minHoldMs` in a transaction, whose check a write before its
   * commit would conflict with. @internal
   */
  expireAtRelease(until: number): void {
    this.keptUntil = until;
  }

  /**
   * Tells the holder the lock is gone (`signal`, `lost$`), then releases it by owner token
   * (`releaseAllHeld()`, shutdown). Resolves to how many keys had a live lease.
   */
  async revoke(reason: string, cause?: unknown, key = this.key): Promise<number> {
    if (this.releasing) {
      // The holder is already letting go: its release decides, unless it is not confirmed.
      await this.releasing.catch(() => undefined);
    }
    // Let go already (by its holder, or by another revoke, which counts its own give-back).
    if (this.isReleased) return 0;
    this.markLost(key, reason, cause);
    return this.giveBackUnreleased();
  }

  /** A confirmed write released the lock (a document lock's `commit`): the handle holds nothing. */
  releasedByWrite(): void {
    if (this.isReleased) return;
    for (const held of this.keeper.unreleased) this.init.operations.ended(held);
    this.releaseSent = true;
    this.releaseConfirmed = true;
    this.settle();
  }

  /** Before a write that ends the hold (see `LeaseKeeper.stopRenewalsBeforeEnd`). @internal */
  stopRenewalsBeforeEnd(): Promise<void> {
    return this.keeper.stopRenewalsBeforeEnd();
  }

  /** Pauses renewals until the returned function is called (see `LeaseKeeper.pauseRenewal`). */
  pauseRenewal(): () => void {
    return this.keeper.pauseRenewal();
  }

  /** The lock as messages name it. */
  get named(): string {
    return this.subject ?? `Lock ${JSON.stringify(this.key)}`;
  }

  /** The owner tokens of every key, for writes that must prove ownership. @internal */
  get heldKeys(): readonly HeldKey[] {
    return this.init.held;
  }

  /** The acquisition's owner scope (`AcquireOptions.scope`), if any. */
  get scope(): string | undefined {
    return this.init.scope;
  }

  /** The owner token of `key`, for writes that must prove ownership (document locks). @internal */
  ownerOf(key: string): string {
    const held = this.init.held.find((entry) => entry.key === key);
    if (!held) throw new MongoLockError(`Lock handle does not hold ${JSON.stringify(key)}`);
    return held.owner;
  }

  /** True while a release (or `expireIn`) is on its way, or retried in the background. */
  get releaseUnderWay(): boolean {
    return this.releasing !== undefined || (this.unconfirmed !== undefined && !this.isReleased);
  }

  private async releaseOnce(): Promise<void> {
    this.releaseSent = true;
    let lostKeys: string[];
    try {
      lostKeys = await this.keeper.releaseAll();
    } catch (error) {
      // Given back in the background (a refusal too): the handle holds nothing any more, and a
      // key is not left held to the end of its lease for want of a second try.
      if (error instanceof Error) this.releaseInBackground(error);
      // A key found lost meanwhile is the answer: the work ran without it.
      const [lost] = this.keeper.lostAtEnd;
      if (lost !== undefined) this.markLost(lost, RELEASED_TOO_LATE);
      this.throwIfLost();
      throw error;
    }
    if (lostKeys.length === 0) {
      // Released while live by the server clock, even if the local deadline (which runs a
      // little ahead) passed while the reply was on its way.
      this.releaseConfirmed = true;
      this.settle();
      return;
    }
    this.markLost(lostKeys[0], RELEASED_TOO_LATE);
    this.settle();
    this.throwIfLost();
  }

  private async expireOnce(ttlMs: number): Promise<void> {
    const keys = [...this.keeper.unreleased];
    // Ours until the lease runs out (at `ttlMs` from now, or, unconfirmed, when it would have
    // anyway); from then on a late win of this token is nobody's.
    let endsInMs = Math.max(ttlMs, this.keeper.leaseEnd - performance.now());
    let failed: { error: unknown } | undefined;
    try {
      await this.keeper.expireIn(ttlMs);
      endsInMs = ttlMs;
    } catch (error) {
      failed = { error };
    } finally {
      // A key found lost is the answer, whatever else failed: the work ran without it.
      const [lost] = this.keeper.lostAtEnd;
      const late =
        'its lease had ended or another holder had taken it before it was left to run out';
      if (lost !== undefined) this.markLost(lost, late);
      this.settle();
      setTimeout(() => {
        for (const held of keys) this.init.operations.ended(held);
      }, endsInMs).unref();
    }
    this.throwIfLost();
    if (failed) throw failed.error;
  }

  /**
   * After a release MongoDB did not confirm: the keys left are given back in the background,
   * retried while the lease may run, and the handle stops counting as held (`done`): shutdown
   * does not wait for it. The deadline stays armed until every give-back is answered.
   */
  private releaseInBackground(error: Error): void {
    this.unconfirmed = error;
    const keys = [...this.keeper.unreleased];
    const lease = this.keeper.lease;
    const givingBack = keys.map((held) => this.init.operations.giveBack(held, lease));
    this.givingBack = Promise.all(givingBack).then((outcomes) => {
      const released = outcomes.filter((outcome) => outcome === 'released').length;
      // One unanswered by the lease end: the deadline told the holder.
      if (outcomes.includes(undefined)) return released;
      const lost = outcomes.findIndex((outcome) => outcome !== 'released');
      if (lost >= 0) this.markLost(keys[lost].key, UNCONFIRMED_RELEASE_FOUND_NONE);
      // A key the first pass found lost stays lost, whatever the others' give-backs found.
      this.releaseConfirmed = lost < 0 && this.keeper.lostAtEnd.length === 0;
      this.settle();
      return released;
    });
    this.markDone();
  }

  /** Gives back the keys not yet released, once; every caller shares that one give-back. */
  private giveBackUnreleased(): Promise<number> {
    if (this.givingBack) return this.givingBack;
    if (this.isReleased) return Promise.resolve(0);
    const keys = [...this.keeper.unreleased];
    const lease = this.keeper.lease;
    this.settle();
    const givingBack = keys.map((held) => this.init.operations.giveBack(held, lease));
    this.givingBack = Promise.all(givingBack).then(
      (outcomes) => outcomes.filter((outcome) => outcome === 'released').length,
    );
    return this.givingBack;
  }

  private throwIfLost(): void {
    // A renewal refused while we awaited it marks the handle lost.
    if (this.lostError) throw this.lostError;
  }

  private settle(): void {
    this.isReleased = true;
    this.keeper.stop();
    this.lostSubject.complete();
    this.markDone();
  }

  private markLost(key: string, reason: string, cause?: unknown): void {
    if (this.lostError || this.isReleased) return;
    this.keeper.stop();
    this.lostError = new LockLostError(lostMessage(key, reason, this.subject), { key, cause });
    this.abortController.abort(this.lostError);
    this.lostSubject.next(this.lostError);
    this.lostSubject.complete();
    this.markDone();
  }
}
