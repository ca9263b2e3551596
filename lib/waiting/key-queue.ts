import { randomBytes } from 'node:crypto';
import { LockNotAcquiredError } from '../errors/lock-not-acquired.error';
import { notAcquiredMessage } from '../lock.messages';
import type { AcquireAttemptOutcome, AcquireAttemptWon } from '../store/acquire-attempt';
import { FENCES_PER_LEASE, GRANT_LEASE_MS, grantToken } from '../store/direct-grant';
import { RESERVATION_TTL_MS, isEntryOwner } from '../store/lock-modes';
import type { ReservationUse } from '../store/lock-modes';
import { holderCapDetail } from '../store/lock-mode-errors';
import { isStoreUnavailableError } from '../store/mongo-error-codes';
import type { KeySignal, LockChangeFeed } from './change-feed';
import type { GrantNews } from './lock-event';
import { LEASE_END_MARGIN_MS, pollDelayMs } from './wait-timing';
import type { WaitTiming } from './wait-timing';
import { Wakeup } from './wakeup';

/**
 * A local run: transfers of a key in a row between callers of this process (a release passing
 * the lock to a caller waiting here: within the lease without a write, else in the release's
 * write; see `LockAcquirer.release`). A run ends after {@link MAX_LOCAL_TRANSFERS} transfers, or
 * once it has lasted {@link LOCAL_RUN_MS}; the next release then goes by the line in the lock
 * document (another process, if one waits), or frees the key for pollers elsewhere, which keep
 * no place in line. Short sections share one cross-process hand-off among many; long ones
 * gain nothing from a run, and the time bound keeps other processes from waiting for it.
 */
export const MAX_LOCAL_TRANSFERS = FENCES_PER_LEASE - 1;

/** How long a local run may last (from its first transfer) before it ends: a few hand-offs' cost. */
export const LOCAL_RUN_MS = 50;

/** A local run of transfers of one key (see {@link MAX_LOCAL_TRANSFERS}). */
export interface LocalRun {
  transfers: number;
  /** When its first transfer happened (`performance.now()`). */
  startedAt: number;
}

/** Whether `run` may go on with one more transfer at `now`. */
export function localRunMayGoOn(run: LocalRun, now: number): boolean {
  return run.transfers < MAX_LOCAL_TRANSFERS && now - run.startedAt < LOCAL_RUN_MS;
}

/** What a release needs to pass the lock to a caller waiting here (exclusive locks only). */
export interface TransferTarget {
  /** The caller's owner token. */
  owner: string;
  ttlMs: number;
  scope: string | null;
  /** The release got no reply: the caller may hold the lock; its call must give it back if it fails. */
  uncertain(): void;
}

/** The head of a key's queue, offered to a release (see {@link KeyQueue.takeSuccessor}). */
export interface OfferedSuccessor {
  target: TransferTarget;
  /** The release passed the lock to it. */
  transferred(won: AcquireAttemptWon): void;
  /** It did not (or the outcome is unknown: `uncertain` first). */
  declined(): void;
}

/**
 * What a waiting caller's acquisition call does for the queue: methods of one object per call
 * (its owner token, its store), not closures per caller (heap per waiter, BENCHMARKS.md).
 */
export interface KeyAttempts {
  /**
   * One acquisition attempt (the call's owner token, so a retry recognises an earlier win),
   * made for this process's queue: `reservation` names the queue's place in the key's own
   * queue, where the store keeps it (fairness between processes).
   */
  attempt(key: string, reservation: string, use: ReservationUse): Promise<AcquireAttemptOutcome>;
  /**
   * This process's queue has left: its reservation, if the store made one, goes; a grant to it
   * goes on, unless it is `exceptGrant` (handed out already).
   */
  withdraw(key: string, reservation: string, exceptGrant?: string): void;
  /**
   * A parked queue keeps its place in the key's line by a small write, not a full attempt: the
   * place's remaining lease, or `undefined` if the key keeps no live place of ours.
   */
  keepPlace(key: string, reservation: string): Promise<number | undefined>;
  /** An attempt won after the caller had left (cancelled mid-attempt): give it back. */
  abandonWin(won: AcquireAttemptWon): void;
}

/** One caller waiting for a key. */
export interface KeyWaitRequest {
  attempts: KeyAttempts;
  /** Monotonic time (`performance.now()`) after which the caller gives up. */
  deadline: number;
  timeoutMs: number;
  signal: AbortSignal | undefined;
  /** Where a release here may pass the lock to this caller directly; absent: never. */
  transfer?: TransferTarget;
}

interface Waiter extends KeyWaitRequest {
  settled: boolean;
  attempting: boolean;
  resolve(won: AcquireAttemptWon): void;
  reject(error: unknown): void;
  cleanup(): void;
}

export interface KeyQueueDeps {
  feed: LockChangeFeed;
  /** This process's holder id: a key it holds is freed only by its own release. */
  holderId: string;
  timing: WaitTiming;
  /** The queue has no waiters left and forgets itself. */
  onEmpty(): void;
  /**
   * The key's local run, if one is going on (see {@link MAX_LOCAL_TRANSFERS}): kept outside the
   * queue, which empties whenever each transfer serves its only caller.
   */
  localRun: { current(): LocalRun | undefined; add(): void; reset(): void };
  /**
   * A release of this process handed the key to another one moments ago: it is held, so the
   * first attempt is the full one at once (see `ReservationUse.plainFirst`).
   */
  heldElsewhere?: boolean;
}

/**
 * The local FIFO queue of one key. Only its head sends attempts, however many callers wait;
 * the queue holds this process's place in the key's line (its reservation). Between attempts
 * the head sleeps until the change feed reports a grant to this process or a release, the
 * holder's lease runs out, a slow safety poll (or, without change streams, a backoff) fires,
 * or its own deadline passes. A release here may pass the lock to the head directly
 * ({@link takeSuccessor}).
 */
export class KeyQueue {
  private readonly waiters: Waiter[] = [];
  private readonly wakeup = new Wakeup();
  private running = false;
  /** Bumped by every release signal, so one arriving mid-attempt is not lost. */
  private releases = 0;
  private unwatch: (() => void) | undefined;
  private holder: { holderId: string | null; leaseEnd: number } | undefined;
  private pollRound = 0;
  /** Looks in a row at a key granted to another process and not yet confirmed (see `waitForChance`). */
  private pendingGrantRound = 0;
  /** The key is held by this process: only a local release (or the lease end) frees it. */
  private heldHere = false;
  /** {@link releases} when the last win was handed out: later releases are the winner's. */
  private releasesAtWin = 0;
  /** The fence of the last win here (by attempt or transfer). */
  private heldFence: bigint | undefined;
  /** The latest outcome: when the holder's lease ends, for the next wait. */
  private lastOutcome: AcquireAttemptOutcome | undefined;
  /** A local transfer on its way: settles when its release's outcome is known. */
  private transferring: Promise<void> | undefined;
  /** The last holder here got the lock by a local transfer; its waiters wait for its release. */
  private wonByTransfer = false;
  /** Why the last attempt got no reply, while MongoDB is unavailable; cleared by a reply. */
  private unavailable: unknown;
  /** A grant to this process was heard since the last attempt: the next one confirms it. */
  private grantHeard = false;
  /**
   * An attempt of this queue is on its way, whichever caller it is for: one whose caller left
   * meanwhile (the head is then the next caller) may still take a grant to our reservation.
   */
  private attemptOnItsWay = false;
  /**
   * The placeholder token of the last grant handed out here without a write (see
   * {@link handOutGrant}): until its holder's first renewal lands it looks pending, and our
   * later attempts and our withdrawal must leave it alone. Unique per grant, so kept.
   */
  private handedOutGrant: string | undefined;
  /** This queue's name in the key's reservations (a field name: letters and digits only). */
  private readonly reservation = `r${randomBytes(9).toString('hex')}`;
  /** Until when the store keeps our reservation (monotonic), if it made one; else undefined. */
  private reservedUntil: number | undefined;
  /** The last attempt or renewal of our place got no outcome: it may have left a reservation. */
  private reservationUnknown = false;
  /**
   * Some attempt got no outcome: it may still land after a later reply said we have no
   * reservation, and write ours again. The queue then withdraws when it empties, whatever.
   */
  private anyAttemptUnanswered = false;
  /** Withdraws the reservation when the queue empties: the last head's (its store). */
  private lastAttempts: KeyAttempts | undefined;

  constructor(
    private readonly key: string,
    private readonly deps: KeyQueueDeps,
  ) {}

  /** Callers still waiting (settled ones leave the array lazily). */
  get size(): number {
    return this.waiters.filter((waiter) => !waiter.settled).length;
  }

  enqueue(request: KeyWaitRequest): Promise<AcquireAttemptWon> {
    return new Promise<AcquireAttemptWon>((resolve, reject) => {
      if (request.signal?.aborted) {
        // The contract is to reject with the caller's own reason, whatever it is.
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
        reject(request.signal.reason);
        return;
      }
      // Written out, not spread: one hidden class for every waiter (a spread gave each its own).
      const waiter: Waiter = {
        attempts: request.attempts,
        deadline: request.deadline,
        timeoutMs: request.timeoutMs,
        signal: request.signal,
        transfer: request.transfer,
        settled: false,
        attempting: false,
        resolve,
        reject,
        cleanup: () => undefined,
      };
      const onAbort = () => this.settle(waiter, { error: request.signal?.reason });
      const deadlineTimer = setTimeout(
        () => this.onDeadline(waiter),
        Math.max(0, request.deadline - performance.now()),
      );
      request.signal?.addEventListener('abort', onAbort, { once: true });
      waiter.cleanup = () => {
        clearTimeout(deadlineTimer);
        request.signal?.removeEventListener('abort', onAbort);
      };
      this.waiters.push(waiter);
      if (!this.running) void this.run();
    });
  }

  private onDeadline(waiter: Waiter): void {
    // An attempt in flight may still win (it is bounded by operationTimeoutMs); the loop
    // decides when it returns.
    if (!waiter.attempting) this.settle(waiter, { error: this.deadlineError(waiter) });
  }

  private settle(waiter: Waiter, result: { won: AcquireAttemptWon } | { error: unknown }): void {
    if (waiter.settled) return;
    waiter.settled = true;
    waiter.cleanup();
    if ('won' in result) waiter.resolve(result.won);
    else waiter.reject(result.error);
    this.wakeup.wake();
  }

  private head(): Waiter | undefined {
    while (this.waiters.length > 0 && this.waiters[0].settled) this.waiters.shift();
    return this.waiters[0];
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      for (let head = this.head(); head; head = this.head()) {
        const releasesBefore = this.releases;
        if (this.transferring) {
          // A release is passing the lock to the head: no attempt meanwhile. Declined: wait as
          // before, unless a release was heard.
          await this.transferring;
          if (!this.wonByTransfer && this.lastOutcome) {
            await this.waitForChance(releasesBefore, this.lastOutcome, head);
            continue;
          }
        }
        if (this.wonByTransfer && this.lastOutcome) {
          // The next waiter waits for the new holder's release.
          this.wonByTransfer = false;
          await this.waitForChance(this.releasesAtWin, this.lastOutcome, this.head());
          continue;
        }
        const outcome = await this.attempt(head);
        // Releases heard during a winning attempt happened before it: the next waiter
        // waits for the winner's own release.
        if (outcome) {
          // After a win the next waiter waits for the winner's release; after a loss, the
          // waiter that lost waits, and one that comes after it tries at once.
          if (outcome.won) await this.waitForChance(this.releasesAtWin, outcome, this.head());
          else await this.waitForChance(releasesBefore, outcome, head);
        }
      }
    } catch (error) {
      // Not expected; but a waiter must never hang on a queue that stopped.
      for (const waiter of this.waiters) this.settle(waiter, { error });
      this.waiters.length = 0;
    } finally {
      this.running = false;
      const reserved = this.reservedUntil !== undefined && this.reservedUntil > performance.now();
      if (reserved || this.reservationUnknown || this.anyAttemptUnanswered) {
        this.lastAttempts?.withdraw(this.key, this.reservation, this.handedOutGrant);
      }
      this.reservedUntil = undefined;
      this.unwatch?.();
      this.unwatch = undefined;
      this.deps.onEmpty();
    }
  }

  /** Runs one attempt for the head; returns the outcome if the queue must wait afterwards. */
  private async attempt(head: Waiter): Promise<AcquireAttemptOutcome | undefined> {
    head.attempting = true;
    this.lastAttempts = head.attempts;
    // Until its outcome is known, the attempt may have left a reservation.
    this.reservationUnknown = true;
    let outcome: AcquireAttemptOutcome;
    const confirmsGrant = this.grantHeard;
    this.grantHeard = false;
    // Nothing known of the key yet: most keys are free. (The first attempt is made inside the
    // first caller's enqueue, so nobody else waits here then and `keep` is false.)
    const plainFirst =
      this.lastOutcome === undefined &&
      !this.anyAttemptUnanswered &&
      !confirmsGrant &&
      !this.deps.heldElsewhere;
    this.attemptOnItsWay = true;
    try {
      // With more callers waiting here, a win keeps our place in the key's line (at its back).
      outcome = await head.attempts.attempt(this.key, this.reservation, {
        keep: this.size > 1,
        grantable: this.deps.feed.streaming,
        ...(plainFirst ? { plainFirst } : {}),
        ...(confirmsGrant ? { confirmsGrant } : {}),
        ...(this.handedOutGrant === undefined ? {} : { exceptGrant: this.handedOutGrant }),
      });
    } catch (error) {
      this.attemptOnItsWay = false;
      head.attempting = false;
      this.anyAttemptUnanswered = true;
      if (head.settled) return undefined;
      if (isStoreUnavailableError(error) && performance.now() < head.deadline) {
        this.unavailable = error;
        await this.wakeup.sleep(pollDelayMs(this.pollRound++, this.deps.timing));
      } else {
        this.settle(head, { error });
      }
      return undefined;
    }
    head.attempting = false;
    this.attemptOnItsWay = false;
    this.unavailable = undefined;
    this.reservationUnknown = false;
    this.lastOutcome = outcome;
    if (outcome.won) {
      this.deps.localRun.reset();
      this.heldFence = outcome.fence;
      // A grant heard while this attempt was on its way is the one it took.
      this.grantHeard = false;
    }
    this.holder = {
      holderId: outcome.holderId,
      leaseEnd: outcome.sentAt + outcome.remainingMs,
    };
    // Whether the store keeps our reservation, and until when.
    this.reservedUntil = outcome.reservedMs ? outcome.sentAt + outcome.reservedMs : undefined;
    // A shared holder or permit holder here does not keep the key from others.
    const entryWin = outcome.won && isEntryOwner(outcome.owner);
    // A grant to this process not yet confirmed is not a hold (its confirmation is up to us),
    // unless it is the one handed out here: a grant to our reservation that this attempt did
    // not take is that one.
    this.heldHere = outcome.won
      ? !entryWin
      : outcome.holderId === this.deps.holderId &&
        (outcome.grantPendingTo === undefined || outcome.grantPendingTo === this.reservation);
    if (outcome.won) {
      if (head.settled) {
        head.attempts.abandonWin(outcome);
        return undefined;
      }
      if (entryWin) {
        // Room may be left for the next waiter: it tries at once.
        this.pollRound = 0;
        this.settle(head, { won: outcome });
        return undefined;
      }
      this.pollRound = 0;
      // Before settling: the winner may release before this method's caller resumes.
      this.releasesAtWin = this.releases;
      this.settle(head, { won: outcome });
      if (this.head()) this.watch(outcome);
      return outcome;
    }
    this.watch(outcome);
    if (performance.now() >= head.deadline) this.settle(head, { error: this.deadlineError(head) });
    // The small command found the key held: a process that hears grants takes its place in
    // line at once, by the full attempt (a poller's would take none on a plain lock).
    if (outcome.plainOnly && this.deps.feed.streaming) return undefined;
    return outcome;
  }

  /**
   * The head, if a release here may pass the lock to it (see `LocalSuccessor`): it sends no
   * attempt until the release's outcome is known, which the caller reports exactly once.
   */
  takeSuccessor(): OfferedSuccessor | undefined {
    const head = this.head();
    const target = head?.transfer;
    if (!head || !target || head.attempting || this.transferring) return undefined;
    const run = this.deps.localRun.current();
    if (run && !localRunMayGoOn(run, performance.now())) {
      this.deps.localRun.reset();
      return undefined;
    }
    head.attempting = true; // the outcome decides, as for an attempt on its way
    let settled!: () => void;
    this.transferring = new Promise((resolve) => (settled = resolve));
    const done = () => {
      this.transferring = undefined;
      settled();
    };
    return {
      target,
      transferred: (won) => {
        head.attempting = false;
        if (head.settled) {
          head.attempts.abandonWin(won); // it left while the release was on its way
          done();
          return;
        }
        this.deps.localRun.add();
        this.heldHere = true;
        this.grantHeard = false;
        this.heldFence = won.fence;
        this.lastOutcome = won;
        this.holder = { holderId: won.holderId, leaseEnd: won.sentAt + won.remainingMs };
        this.releasesAtWin = this.releases;
        this.wonByTransfer = true;
        this.settle(head, { won });
        done();
      },
      declined: () => {
        head.attempting = false;
        this.deps.localRun.reset();
        if (performance.now() >= head.deadline) {
          this.settle(head, { error: this.deadlineError(head) });
        }
        done();
      },
    };
  }

  private watch(outcome: AcquireAttemptOutcome): void {
    this.unwatch ??= this.deps.feed.watchKey(
      this.key,
      (signal, grant) => this.onKeySignal(signal, grant),
      outcome.operationTime,
    );
  }

  private onKeySignal(signal: KeySignal, grant?: GrantNews): void {
    this.pollRound = 0;
    switch (signal) {
      case 'granted':
        // Our hold, if we think we have one, is over: the key was granted anew (unless this is
        // the news of the very grant we took, which came after we took it).
        if (this.heldHere && grant && grant.fence <= (this.heldFence ?? -1n)) return;
        this.heldHere = false;
        if (grant && this.handOutGrant(grant)) return;
        this.grantHeard = true;
        break;
      case 'ended-here': // Our hold ended without our write freeing the key (it was lost).
      case 'released-here': // Our release freed the key.
        this.heldHere = false;
        break;
      case 'granted-elsewhere':
        // Our release handed the key to another process: we wait for our turn (our grant),
        // once we have a place in line; without one, the head tries now, which takes one.
        this.heldHere = false;
        if (this.inLine()) return;
        break;
      default:
        // While this process holds the key, an event is stale (or our own release's, ahead of
        // its reply) and attempting could only fail. The local release, or the lease end,
        // wakes us.
        if (this.heldHere) return;
    }
    this.releases += 1;
    this.wakeup.wake();
  }

  /**
   * Hands a grant heard on the change stream to the head at once, without a write: the head
   * holds the lock under the grant's placeholder token, and its first renewal, sent at once,
   * confirms it (see `LeaseKeeper`). Only when that is safe and the deadline is known:
   * - the grant is to our reservation, and the event carries its token and cluster time;
   * - the head asks for an exclusive, unscoped lock a release may pass on (`transfer`), and
   *   no attempt, local transfer or unanswered attempt of ours could take the grant as well;
   * - the event comes after our last answered attempt, so the grant was written after that
   *   attempt was sent, and its lease, counted from the attempt's `sentAt`, ends no sooner
   *   than the head's local deadline; that attempt is recent enough to leave at least half a
   *   grant lease.
   * Otherwise the next attempt takes the grant with the small confirming command. Returns
   * whether the head took it.
   */
  private handOutGrant({ fence, reservation, owner, at }: GrantNews): boolean {
    const head = this.head();
    const last = this.lastOutcome;
    if (!head?.transfer || head.transfer.scope !== null) return false;
    if (performance.now() >= head.deadline) return false;
    if (this.attemptOnItsWay || this.transferring || this.anyAttemptUnanswered) return false;
    if (reservation !== this.reservation || owner !== grantToken(reservation, fence)) return false;
    if (!at || !last?.operationTime || at.compare(last.operationTime) <= 0) return false;
    if (performance.now() - last.sentAt > GRANT_LEASE_MS / 2) return false;
    // The last caller waiting here: the confirming renewal drops our place in line, and the
    // queue has none from now on (a caller that comes meanwhile takes a new one).
    const leavesLine = this.waiters.every((waiter) => waiter === head || waiter.settled);
    const won: AcquireAttemptWon = {
      key: this.key,
      owner,
      fence,
      holderId: this.deps.holderId,
      sentAt: last.sentAt,
      remainingMs: GRANT_LEASE_MS,
      operationTime: at,
      won: true,
      grantUnconfirmed: true,
      ...(leavesLine ? { leavesLine } : {}),
    };
    if (leavesLine) this.reservedUntil = undefined;
    // As after a win: the next waiter waits for this holder's release.
    this.deps.localRun.reset();
    this.heldHere = true;
    this.grantHeard = false;
    this.heldFence = fence;
    this.handedOutGrant = owner;
    this.lastOutcome = won;
    this.holder = { holderId: won.holderId, leaseEnd: won.sentAt + won.remainingMs };
    this.releasesAtWin = this.releases;
    this.wonByTransfer = true;
    this.pollRound = 0;
    this.settle(head, { won });
    return true;
  }

  /** The store keeps a reservation of ours, as far as we know: a release may grant to us. */
  private inLine(): boolean {
    return this.reservedUntil !== undefined && this.reservedUntil > performance.now();
  }

  /** Sleeps until a release, the lease end, a poll, or the head's deadline. */
  private async waitForChance(
    releasesBefore: number,
    outcome: AcquireAttemptOutcome,
    /** The waiter the wait is for: if it leaves, the next one tries at once. */
    attempted: Waiter | undefined,
  ): Promise<void> {
    let leaseEnd = outcome.sentAt + outcome.remainingMs + LEASE_END_MARGIN_MS;
    // The key is granted to another process's place in line and not yet confirmed: the lease
    // we were told is the grant's (`GRANT_LEASE_MS`), which the grantee's confirmation (its own
    // attempt, or the first renewal of a grant handed out on its event) replaces by its own
    // lease, perhaps much shorter, and tells us nothing. Look again soon, backing off while it
    // stays unconfirmed: the next reply has the lease that counts (else a grantee that died
    // after confirming would keep us waiting for the grant's lease end).
    if (!outcome.won && outcome.grantPendingTo !== undefined) {
      if (outcome.grantPendingTo !== this.reservation) {
        const look = pollDelayMs(this.pendingGrantRound++, this.deps.timing);
        leaseEnd = Math.min(leaseEnd, performance.now() + look);
      }
    } else {
      this.pendingGrantRound = 0;
    }
    // With a stream, each quiet safety poll in a row doubles the next one (up to 8x), so
    // many parked keys cost few attempts; a release resets it.
    const pollDelay = this.deps.feed.streaming
      ? this.deps.timing.safetyPollIntervalMs * 2 ** Math.min(this.pollRound++, 3)
      : pollDelayMs(this.pollRound++, this.deps.timing);
    const nextAttemptAt = Math.min(leaseEnd, performance.now() + pollDelay);
    for (let head = this.head(); head; head = this.head()) {
      if (this.releases !== releasesBefore) return;
      // The waiter that attempted left (perhaps while its attempt was on its way): the next
      // may ask for less (a shared lock behind an exclusive one, fewer permits) and must try
      // now, which also updates our reservation.
      if (head !== attempted) return;
      const now = performance.now();
      if (now >= nextAttemptAt) return;
      if (now >= head.deadline) {
        this.settle(head, { error: this.deadlineError(head) });
        continue;
      }
      // A kept place is renewed before it runs out: by a small write while the stream tells
      // us of releases, else by the attempt (a poller attempts often anyway).
      const refreshAt =
        this.reservedUntil === undefined ? Infinity : this.reservedUntil - RESERVATION_TTL_MS / 3;
      if (now >= refreshAt) {
        if (!this.deps.feed.streaming || !(await this.keepPlace(head))) return;
        continue;
      }
      await this.wakeup.sleep(Math.min(nextAttemptAt, head.deadline, refreshAt) - now);
    }
  }

  /** Renews our place by the small write; false if an attempt must take one again. */
  private async keepPlace(head: Waiter): Promise<boolean> {
    const sentAt = performance.now();
    const before = this.reservedUntil;
    try {
      const reservedMs = await head.attempts.keepPlace(this.key, this.reservation);
      // A grant handed out meanwhile decided our place (its renewal drops it): leave that be.
      if (this.reservedUntil !== before) return true;
      this.reservedUntil = reservedMs === undefined ? undefined : sentAt + reservedMs;
      return reservedMs !== undefined;
    } catch {
      // It may have landed: if the queue empties now, it withdraws all the same. The attempt
      // that follows meets the same trouble, and handles it.
      this.reservationUnknown = true;
      return false;
    }
  }

  /** At the deadline: MongoDB's unavailability if that is what kept us waiting, else a timeout. */
  private deadlineError(waiter: Waiter): unknown {
    return this.unavailable ?? this.timeoutError(waiter);
  }

  private timeoutError(waiter: Waiter): LockNotAcquiredError {
    const retryAfterMs = this.holder
      ? Math.max(0, Math.ceil(this.holder.leaseEnd - performance.now()))
      : undefined;
    const holderId = this.holder?.holderId ?? undefined;
    const last = this.lastOutcome;
    const atHolderCap = last !== undefined && !last.won && last.atHolderCap === true;
    return new LockNotAcquiredError(
      notAcquiredMessage([this.key], waiter.timeoutMs, holderId, retryAfterMs) +
        (atHolderCap ? holderCapDetail() : ''),
      { keys: [this.key], retryAfterMs, holderId },
    );
  }
}
