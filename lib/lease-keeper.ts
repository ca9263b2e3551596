import { isPassingFailure } from './store/mongo-error-codes';
import { formatMs } from './util/durations';
import { outsideCaller } from './util/outside-caller';
import { unrefTimer } from './util/timers';

/** What a renewal found: our lease extended (remaining time by the server clock), or not ours. */
export type RenewLeaseOutcome =
  { renewed: true; sentAt: number; remainingMs: number } | { renewed: false; sentAt: number };

/** What a release found: our live lease ended, ours already run out, or not ours any more. */
export type ReleaseLeaseOutcome = 'released' | 'expired' | 'lost';

export interface HeldKey {
  key: string;
  /** The acquisition's owner token: the only proof of ownership, never shown to users. */
  owner: string;
  fence: bigint;
}

/** The store operations a held lock needs. */
export interface LeaseOperations {
  /** The lease ends `ttlMs` from now or later (never sooner than it did); `exactly`: just then. */
  renew(held: HeldKey, ttlMs: number, exactly?: boolean): Promise<RenewLeaseOutcome>;
  /** `lease`: given only when it may pass to another caller without a write (see `releaseAll`). */
  release(held: HeldKey, lease?: HandableLease): Promise<ReleaseLeaseOutcome>;
  /**
   * Releases in the background, retrying while `lease` (as last renewed or extended) may run;
   * `undefined` if it could not be sent.
   */
  giveBack(held: HeldKey, lease: HandableLease): Promise<ReleaseLeaseOutcome | undefined>;
  /** The lease ended without a release (a write, `expireIn`): its token's late win is nobody's. */
  ended(held: HeldKey): void;
}

/** A lease a release may pass on without a write: its local deadline and its `ttlMs`. */
export interface HandableLease {
  end: number;
  ttlMs: number;
}

export interface LeaseKeeperInit {
  held: readonly HeldKey[];
  leaseEnd: number;
  ttlMs: number;
  renew: boolean;
  renewalIntervalRatio: number;
  maxHoldMs: number;
  operations: LeaseOperations;
  onLost(key: string, reason: string, cause?: unknown): void;
}

/** Delay between renewal retries after a transient error. */
const RENEW_RETRY_MS = 250;

/**
 * How much earlier than the server's lease end the holder's signal aborts: 5 % of the lease,
 * within 25 ms..1 s. It absorbs a late timer, so the holder is told before anyone else is granted.
 */
export function leaseSafetyMarginMs(ttlMs: number): number {
  return Math.min(1_000, Math.max(25, ttlMs / 20));
}

/**
 * The holder's local deadline (monotonic): the server-reported remaining lease counted from
 * before the request was sent, less the safety margin. Never later than the server's end.
 */
export function localLeaseEnd(sentAt: number, remainingMs: number, ttlMs: number): number {
  return sentAt + remainingMs - leaseSafetyMarginMs(ttlMs);
}

const RAN_OUT = 'its lease ran out before it was renewed';
/** Taken without renewal (`acquire`'s default): say so, and how to keep it longer. */
const RAN_OUT_UNRENEWED =
  'its lease (ttlMs) ran out, and it was taken without renewal (as acquire and tryAcquire take ' +
  'a lock unless given renew: true); give renew: true or a longer ttlMs, or call extend() in time';
const RAN_OUT_PAUSED =
  'its lease ran out during its transaction (renewed in full as it began, not since: the work must fit in one lease)';

/**
 * Renews a lease at `renewalIntervalRatio` of it; declares it lost when a renewal is refused,
 * the local deadline passes first, or `maxHoldMs` is exceeded. The deadline stays armed until a
 * release is confirmed, so a failed release still reports the loss when the lease runs out.
 */
export class LeaseKeeper {
  /** Monotonic time at which the shortest lease of the keys ends. */
  leaseEnd: number;
  private ttlMs: number;
  private cancelRenewal: (() => void) | undefined;
  private cancelDeadline: (() => void) | undefined;
  private cancelMaxHold: (() => void) | undefined;
  private stopped = false;
  private renewalStopped = false;
  private renewalPaused = false;
  private renewInFlight = false;
  /** The renewal under way, if any; never rejects (a failure is its caller's). */
  private renewing: Promise<void> | undefined;
  private remaining: HeldKey[];
  /** Keys a release or `expireIn` found lost (their entry gone), even when another key failed. */
  readonly lostAtEnd: string[] = [];
  /**
   * Only a write can tell this lease from one that ended behind our back: set once a release
   * was tried, a renewal's outcome was unknown, or a transaction wrote the lock.
   */
  private onlyByWrite = false;

  constructor(private readonly init: LeaseKeeperInit) {
    this.leaseEnd = init.leaseEnd;
    this.ttlMs = init.ttlMs;
    this.remaining = [...init.held];
    this.armDeadline();
    if (init.renew) {
      this.scheduleRenewal();
      if (Number.isFinite(init.maxHoldMs)) {
        const tooLong = `it was held longer than maxHoldMs (${formatMs(init.maxHoldMs)})`;
        this.cancelMaxHold = unrefTimer(() => this.lose(init.held[0].key, tooLong), init.maxHoldMs);
      }
    }
  }

  get unreleased(): readonly HeldKey[] {
    return this.remaining;
  }

  /** The lease as last renewed or extended: its local deadline, and the `ttlMs` last asked. */
  get lease(): HandableLease {
    return { end: this.leaseEnd, ttlMs: this.ttlMs };
  }

  /** Renews no more; the local deadline still reports the loss when the lease runs out. */
  stopRenewal(): void {
    this.renewalStopped = true;
    this.cancelRenewal?.();
    this.cancelMaxHold?.();
  }

  /**
   * Renews no more until the returned function is called; the deadline stays armed. For a locked
   * transaction: a renewal writes the lock it checks.
   */
  pauseRenewal(): () => void {
    // A transaction whose commit outcome is unknown may still land: its release must write.
    this.onlyByWrite = true;
    this.renewalPaused = true;
    this.cancelRenewal?.();
    return () => {
      this.renewalPaused = false;
      // Only a lease kept by renewals: `renew: false` renews nothing after the transaction either.
      if (this.init.renew) this.scheduleRenewal();
    };
  }

  /**
   * Reports the loss now if the deadline passed: after a process pause, timers fire in due order,
   * so work due before the deadline timer would run on unprotected.
   */
  checkDeadline(): void {
    if (!this.stopped && performance.now() >= this.leaseEnd) this.ranOut();
  }

  /** Everything stops: the lease was released, or its loss was reported. */
  stop(): void {
    this.stopRenewal();
    this.stopped = true;
    this.cancelDeadline?.();
  }

  /**
   * Renews every key now; `ttlMs` also becomes the lease of later renewals. False if nothing was
   * sent: the hold ended, or is ending (a release or commit stopped renewals), meanwhile.
   */
  async renewNow(ttlMs: number | undefined): Promise<boolean> {
    // One renewal at a time.
    await this.renewing;
    if (this.stopped || this.renewalStopped) return false;
    if (ttlMs !== undefined) this.ttlMs = ttlMs;
    const renewal = this.renewAll(false);
    this.renewing = renewal.catch(() => undefined);
    await renewal;
    return true;
  }

  /**
   * Before a write that ends the hold (a document's commit): no renewal is sent from now on, and
   * the one in flight is answered first (it could otherwise land after the write and find the
   * hold gone).
   */
  async stopRenewalsBeforeEnd(): Promise<void> {
    this.stopRenewal();
    await this.renewing;
  }

  /**
   * Releases every key at once (the last taken first); returns the keys found lost. A key whose
   * release failed stays (a second call retries only it); the deadline stays armed until none do.
   * Keys found lost by a release, or by `expireIn`, stay in {@link lostAtEnd} whatever else fails.
   */
  async releaseAll(): Promise<string[]> {
    this.stopRenewal();
    await this.renewing;
    // Handed on without a write only on a first try, with the lease known to be ours.
    const lease = this.stopped || this.onlyByWrite ? undefined : this.lease;
    this.onlyByWrite = true;
    const releasing = [...this.remaining].reverse();
    const outcomes = await Promise.allSettled(
      releasing.map((held) => this.init.operations.release(held, lease)),
    );
    for (const [index, outcome] of outcomes.entries()) {
      if (outcome.status === 'rejected') continue;
      if (outcome.value !== 'released') this.lostAtEnd.push(releasing[index].key);
      this.remaining = this.remaining.filter((kept) => kept !== releasing[index]);
    }
    const failed = outcomes.find((outcome) => outcome.status === 'rejected');
    if (failed) throw failed.reason;
    this.stop();
    return this.lostAtEnd;
  }

  /**
   * Ends the hold by expiry: every key's lease ends `ttlMs` from now by the server clock (may
   * shorten it); returns the keys found lost. Throws if a renew failed (the lease then ends at
   * `ttlMs` from now or when it would have). Stopped either way.
   */
  async expireIn(ttlMs: number): Promise<string[]> {
    this.stopRenewal();
    await this.renewing;
    if (this.stopped) return [];
    const keys = [...this.remaining];
    try {
      const outcomes = await Promise.allSettled(
        keys.map((held) => this.init.operations.renew(held, ttlMs, true)),
      );
      for (const [index, outcome] of outcomes.entries()) {
        if (outcome.status === 'fulfilled' && !outcome.value.renewed) {
          this.lostAtEnd.push(keys[index].key);
        }
      }
      const failed = outcomes.find((outcome) => outcome.status === 'rejected');
      if (failed) throw failed.reason;
      return this.lostAtEnd;
    } finally {
      this.stop();
    }
  }

  private lose(key: string, reason: string, cause?: unknown): void {
    if (this.stopped) return;
    this.stop();
    this.init.onLost(key, reason, cause);
  }

  /** {@link lose}, named by the first key not yet released. */
  private loseFirstKey(reason: string, cause?: unknown): void {
    this.lose((this.remaining[0] ?? this.init.held[0]).key, reason, cause);
  }

  /** The lease ended unrenewed: paused for a transaction whose work outlasted it, or late. */
  private ranOut(): void {
    if (this.renewalPaused) this.loseFirstKey(RAN_OUT_PAUSED);
    else this.loseFirstKey(this.init.renew ? RAN_OUT : RAN_OUT_UNRENEWED);
  }

  private armDeadline(): void {
    this.cancelDeadline?.();
    this.cancelDeadline = unrefTimer(() => this.ranOut(), this.leaseEnd - performance.now());
  }

  /**
   * Renews at `renewalIntervalRatio` of a lease counted back from its end, so a partly used lease
   * (a multi-key lock's first key, taken while waiting for the others) renews sooner.
   */
  private scheduleRenewal(delayMs = this.nextRenewalDelayMs()): void {
    if (this.stopped || this.renewalStopped || this.renewalPaused) return;
    this.cancelRenewal?.();
    this.cancelRenewal = unrefTimer(() => {
      if (this.renewInFlight) {
        // One renewal at a time: an extend() is renewing now.
        void this.renewing?.finally(() => this.scheduleRenewal());
        return;
      }
      // A throwing loss listener must not become an unhandled rejection.
      this.renewing = this.renewAll(true).catch(() => undefined);
    }, delayMs);
  }

  private nextRenewalDelayMs(): number {
    const untilLeaseEnd = this.leaseEnd - performance.now();
    return Math.max(0, untilLeaseEnd - this.ttlMs * (1 - this.init.renewalIntervalRatio));
  }

  /** Renews all keys in parallel; `scheduled` ones retry transient errors until the deadline. */
  private async renewAll(scheduled: boolean): Promise<void> {
    const ttlMs = this.ttlMs;
    // A release may shrink `remaining` while we wait: match the replies to what was sent.
    const keys = [...this.remaining];
    let outcomes: RenewLeaseOutcome[];
    this.renewInFlight = true;
    // The key whose renewal failed first (the error Promise.all gives), to name it in the loss.
    let failedKey: string | undefined;
    try {
      const renew = (held: HeldKey) => {
        const renewal = outsideCaller(() => this.init.operations.renew(held, ttlMs));
        // A branch beside the renewal, not in its chain: the reply is read as soon as before.
        renewal.catch(() => (failedKey ??= held.key));
        return renewal;
      };
      outcomes = await Promise.all(keys.map(renew));
    } catch (error) {
      // It may yet land, with its own lease length.
      this.onlyByWrite = true;
      if (this.stopped) return;
      if (!scheduled) throw error;
      // MongoDB away, or a passing refusal (Interrupted): retried while the lease runs.
      if (isPassingFailure(error) && performance.now() < this.leaseEnd) {
        this.scheduleRenewal(Math.min(RENEW_RETRY_MS, (this.leaseEnd - performance.now()) / 4));
      } else {
        this.lose(failedKey ?? keys[0].key, 'renewing it failed', error);
      }
      return;
    } finally {
      this.renewInFlight = false;
    }
    if (this.stopped) return;
    // Answered after the lease ended (deadline timer not yet run): it may have landed after
    // that end, the lease taken in between, so it proves nothing.
    if (performance.now() >= this.leaseEnd) return this.ranOut();
    let leaseEnd = Infinity;
    for (const [index, outcome] of outcomes.entries()) {
      const lost = 'its lease had ended or another holder took it';
      if (!outcome.renewed) return this.lose(keys[index].key, lost);
      leaseEnd = Math.min(leaseEnd, localLeaseEnd(outcome.sentAt, outcome.remainingMs, ttlMs));
    }
    this.leaseEnd = leaseEnd;
    this.armDeadline();
    if (this.init.renew) this.scheduleRenewal();
  }
}
