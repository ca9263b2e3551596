import { Logger } from '@nestjs/common';
import { Observable, Subject } from 'rxjs';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import { LeadershipResignedError } from '../errors/leadership-resigned.error';
import { LockNotAcquiredError } from '../errors/lock-not-acquired.error';
import { LockServiceClosedError } from '../errors/lock-service-closed.error';
import { SERVICE_CLOSED_MESSAGE } from '../lock.messages';
import { LockStoreUnavailableError } from '../errors/lock-store-unavailable.error';
import type { AcquireOptions } from '../interfaces/lock-options.interface';
import type { MongoLockHandle } from '../lock-handle';
import { optionsObject } from '../option-checks';
import { validateWaitMs } from '../options';
import { MAX_TIMER_MS } from '../util/timers';
import { callAt, unrefTimer, wakeUp } from '../util/timers';
import { campaignTimedOut, type Election, type ElectionWaiter } from './election';
import { HeldLeaderTerm, type LeaderTerm } from './leader-term';
import { watchLeader, type LeaderInfo, type LeaderWatchSource } from './leader-watch';

/** Options of `LockService.leadership()`. */
export interface LeadershipOptions {
  /** Lease in ms (default `defaultTtlMs`): how soon another instance takes over after a crash. */
  ttlMs?: number;
}

/** Options of {@link Leadership.campaign}. */
export interface CampaignOptions {
  /** Aborting it gives up the campaign; the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /**
   * Give up after this long with `LockNotAcquiredError`, or `LockStoreUnavailableError` if
   * MongoDB could not be reached then. Default: wait until elected (through outages too).
   */
  timeoutMs?: number;
}

/** What a leadership needs of its service. @internal */
export interface LeadershipHost extends LeaderWatchSource {
  /** `queued`: told once if the join's reply leaves the call waiting in line. */
  acquire(key: string, options: AcquireOptions, queued: () => void): Promise<MongoLockHandle>;
  /** How late a try's reply may be: a join unanswered by then counts as answered. */
  answerWithinMs: number;
  /** A term renews at this share of its lease: a third at most, so a loss is told within it. */
  renewalIntervalRatio: number;
  /** Called at the start of every term (metrics). */
  termBegan(name: string): void;
}

/** Longest wait of one acquisition (a timer's limit less overrun); then the next one waits. */
const LONGEST_WAIT_MS = MAX_TIMER_MS - 60_000;

/** Pause after a failed attempt (MongoDB unreachable, the line full) before the next. */
const RETRY_DELAY_MS = 1_000;

/**
 * Leadership of one name: one leader at a time, elected in the order candidates stood. A term
 * is a renewed lock on the name's key, with a fence and a signal that aborts before anyone else
 * can lead (at the leader's own lease deadline if renewals fail). One per name and `LockService`.
 *
 * @example
 * const orders = locks.leadership('orders-projector', { ttlMs: 10_000 });
 * orders.terms$.subscribe((term) => runProjector({ fence: term.fence, signal: term.signal }));
 */
export class Leadership {
  /** Who leads now, for any instance (this one campaigning or not); `null` while nobody does. */
  readonly leader$: Observable<LeaderInfo | null>;
  /** Each term this instance wins; campaigns while subscribed, resigns when the last one leaves. */
  readonly terms$: Observable<LeaderTerm>;
  private readonly logger = new Logger('Leadership');
  private readonly termStarts = new Subject<LeaderTerm>();
  private live: HeldLeaderTerm | undefined;
  /** The live term was given to a `campaign()` call: it lasts until `resign()`. */
  private liveClaimed = false;
  private election: Election | undefined;
  private standers = 0;
  private standingLoop: Promise<void> | undefined;
  /** Gives up the standing loop's own campaign (others of this instance's go on). */
  private standingCampaign: AbortController | undefined;
  private readonly closing = new AbortController();

  constructor(
    readonly name: string,
    private readonly key: string,
    private ttlMs: number | undefined,
    private readonly host: LeadershipHost,
  ) {
    this.leader$ = watchLeader(host, key);
    this.terms$ = new Observable<LeaderTerm>((subscriber) => {
      if (this.live?.active) subscriber.next(this.live);
      const subscription = this.termStarts.subscribe(subscriber);
      this.standers += 1;
      this.standingLoop ??= this.stand();
      return () => {
        subscription.unsubscribe();
        this.standers -= 1;
        if (this.standers === 0) void this.stepDown();
      };
    });
  }

  /** Whether this instance leads now. */
  get isLeader(): boolean {
    return this.live?.active === true;
  }

  /** Whether this instance stands now: leading, or in line (a campaign or `terms$`). */
  get standing(): boolean {
    return this.standers > 0 || this.election !== undefined || this.isLeader;
  }

  /** The first `ttlMs` given sets the lease of terms (not a call that only watched). @internal */
  useTtl(ttlMs: number | undefined): void {
    if (ttlMs === undefined || ttlMs === this.ttlMs) return;
    if (this.ttlMs !== undefined) {
      throw new InvalidLockOptionsError(
        `Leadership ${JSON.stringify(this.name)} already exists with ttlMs ${this.ttlMs}; got ${ttlMs}`,
        { option: 'ttlMs' },
      );
    }
    this.ttlMs = ttlMs;
  }

  /** This instance's current term, while it leads. */
  get term(): LeaderTerm | undefined {
    return this.live?.active ? this.live : undefined;
  }

  /**
   * Resolves with the term once this instance leads (at once if it does); campaigns of one
   * instance share one place in line. Rejects with `LeadershipResignedError` on `resign()`.
   */
  campaign(options?: CampaignOptions | null): Promise<LeaderTerm> {
    return this.enter(options, false);
  }

  /** A campaign call, or the standing loop's (`terms$`). */
  private enter(
    options: CampaignOptions | null | undefined,
    standing: boolean,
  ): Promise<HeldLeaderTerm> {
    let signal: AbortSignal | undefined;
    let timeoutMs: number | undefined;
    try {
      const given = optionsObject(options, ['signal', 'timeoutMs']);
      signal = given.signal;
      if (signal !== undefined && !(signal instanceof AbortSignal)) {
        throw new InvalidLockOptionsError('signal must be an AbortSignal', { option: 'signal' });
      }
      timeoutMs = validateWaitMs('timeoutMs', given.timeoutMs);
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    // A caller that gave up already is not given the term: it would last until `resign()`.
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    if (this.live?.active) {
      if (!standing) this.liveClaimed = true;
      return Promise.resolve(this.live);
    }
    const patient = timeoutMs !== 0;
    const election = this.elect(!patient);
    const startedAt = performance.now();
    return new Promise<HeldLeaderTerm>((resolve, reject) => {
      let cancelTimer = () => {};
      let settled = false;
      const waiter: ElectionWaiter = {
        caller: !standing,
        patient,
        won: (term) => {
          done();
          // Never hand out a term that ended meanwhile (resigned, lost).
          if (term.active) resolve(term);
          else reject(new LeadershipResignedError(this.name));
        },
        failed: (error) => {
          done();
          reject(error); // eslint-disable-line @typescript-eslint/prefer-promise-reject-errors -- passed on as thrown
        },
      };
      const done = () => {
        settled = true;
        cancelTimer();
        signal?.removeEventListener('abort', onAbort);
        election.waiters.delete(waiter);
      };
      const giveUp = (reason: unknown) => {
        if (settled) return;
        done();
        if (election.waiters.size === 0) this.abandon(election, reason);
        reject(reason); // eslint-disable-line @typescript-eslint/prefer-promise-reject-errors -- the caller's own abort reason
      };
      const onAbort = () => giveUp(signal?.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (timeoutMs !== undefined) {
        const waitMs = timeoutMs;
        // From the call, but not before the first answer: even 0 gets one attempt's answer.
        void (patient ? election.joinAnswer : election.firstAnswer).then(() => {
          if (settled) return;
          const end = { name: this.name, key: this.key, timeoutMs: waitMs };
          // A wait's timers: under legacy fake timers, real time ends it, as it ends acquire's.
          cancelTimer = callAt(startedAt + waitMs, () =>
            giveUp(campaignTimedOut(end, election.silence)),
          );
        });
      }
      election.waiters.add(waiter);
    });
  }

  /**
   * Ends this instance's term (its signal aborts first) and gives up any election on its way;
   * pending campaigns reject with `LeadershipResignedError`. `terms$` subscribers go back in line.
   */
  async resign(): Promise<void> {
    if (this.election) this.abandon(this.election, new LeadershipResignedError(this.name));
    await this.live?.resign();
  }

  /**
   * The last `terms$` subscriber left: give up the standing campaign (a waiting `campaign()`
   * keeps the place in line) and end the term unless a `campaign()` call was given it.
   */
  private async stepDown(): Promise<void> {
    this.standingCampaign?.abort(new LeadershipResignedError(this.name));
    if (!this.liveClaimed) await this.live?.resign();
  }

  /** Resigns for good: at shutdown, before the service stops. @internal */
  async close(): Promise<void> {
    this.closing.abort();
    // Campaigns waiting, and work under the term, learn that the service closed, not that this
    // instance resigned: before terms$ completes, whose last subscriber leaving would resign.
    const closed = new LockServiceClosedError(SERVICE_CLOSED_MESSAGE);
    if (this.election) this.abandon(this.election, closed);
    const resigned = this.live?.resign(closed);
    this.termStarts.complete();
    await resigned;
    await this.standingLoop;
  }

  /** The election under way, or a new one; `tries`: it starts with a try (`timeoutMs: 0`). */
  private elect(tries: boolean): Election {
    if (this.election) return this.election;
    let answered!: () => void;
    let joined!: () => void;
    const election: Election = {
      abort: new AbortController(),
      firstAnswer: new Promise<void>((resolve) => (answered = resolve)),
      joinAnswer: new Promise<void>((resolve) => (joined = resolve)),
      waiters: new Set(),
    };
    const answer = (tryOnly = false) => {
      answered();
      if (!tryOnly) joined();
    };
    const tell = (notify: (waiter: ElectionWaiter) => void) => {
      [...election.waiters].forEach(notify);
      answer();
      if (this.election === election) this.election = undefined;
    };
    this.win(election, answer, tries).then(
      (term) => tell((waiter) => waiter.won(term)),
      (error: unknown) => tell((waiter) => waiter.failed(error)),
    );
    this.election = election;
    return election;
  }

  /** Ends an election nobody waits for; a later campaign starts anew, at the back of the line. */
  private abandon(election: Election, reason: unknown): void {
    if (this.election === election) this.election = undefined;
    election.abort.abort(reason);
  }

  /**
   * Stands in line in one write, whose reply is the first answer (a campaign's timeout runs from
   * it): a try before the join would leave a gap in which a resigning leader wins again. A join
   * unanswered as long as a try's reply may be (MongoDB away, the service starting) answers too.
   * Only `tries` (a `campaign({ timeoutMs: 0 })` started it) sends a try first, as `tryAcquire`
   * does: no entry unless it wins. Refused, it ends, unless a campaign that waits came meanwhile.
   */
  private async win(
    election: Election,
    answered: (tryOnly?: boolean) => void,
    tries: boolean,
  ): Promise<HeldLeaderTerm> {
    const { signal } = election.abort;
    for (let first = true; ; first = false) {
      const trying = tries && first;
      const answer = () => answered(trying);
      // A reply that puts us in line is MongoDB's answer; a join unanswered as long as a reply
      // may take is its silence, which a campaign timing out meanwhile reports.
      const queued = () => {
        election.silence = undefined;
        answer();
      };
      const unanswered = () => {
        election.silence ??= {};
        answer();
      };
      let handle: MongoLockHandle;
      try {
        const options = {
          ttlMs: this.ttlMs,
          timeoutMs: trying ? 0 : LONGEST_WAIT_MS,
          renew: { intervalRatio: this.host.renewalIntervalRatio },
          signal,
          metricsLabel: 'leadership',
        };
        const cancelLate = unrefTimer(unanswered, this.host.answerWithinMs);
        handle = await this.host.acquire(this.key, options, queued).finally(() => {
          cancelLate();
        });
      } catch (error) {
        const unreachable = error instanceof LockStoreUnavailableError;
        // Refused, MongoDB answered; unreachable, its silence is why until an attempt is answered.
        election.silence = unreachable ? { cause: error } : undefined;
        answer();
        // Given up meanwhile: the reason is why, whatever the attempt answered.
        if (signal.aborted) throw signal.reason;
        if (!unreachable && !(error instanceof LockNotAcquiredError)) throw error;
        if (trying && ![...election.waiters].some((waiter) => waiter.patient)) {
          // Synchronously: a campaign called from now on starts a new election.
          this.abandon(election, error);
          // As tryAcquire's: MongoDB unreachable is not a refusal.
          const end = { name: this.name, key: this.key, timeoutMs: 0 };
          throw unreachable ? error : campaignTimedOut(end, undefined, error);
        }
        if (trying && error instanceof LockNotAcquiredError) continue;
        await wakeUp({}, performance.now() + RETRY_DELAY_MS, signal);
        continue;
      }
      election.silence = undefined;
      if (signal.aborted) {
        // Everyone gave up as the election was won: the term is nobody's.
        await handle.release().catch(() => undefined);
        throw signal.reason;
      }
      const term = new HeldLeaderTerm(this.name, handle);
      if (!term.active) {
        // Lost before it was handed out (a pause past its lease): no term; stand again. It
        // answers the first try, so a campaign's timeout runs.
        answered();
        await term.resign();
        continue;
      }
      this.live = term;
      // Before terms$ hears of it: a subscriber leaving at once must not end a campaign()'s term.
      this.liveClaimed = [...(this.election?.waiters ?? [])].some((waiter) => waiter.caller);
      void term.ended.then(() => {
        if (this.live === term) this.live = undefined;
      });
      this.host.termBegan(this.name);
      this.termStarts.next(term);
      return term;
    }
  }

  /** While `terms$` has subscribers: campaign, lead until the term ends, campaign again. */
  private async stand(): Promise<void> {
    const wanted = () => this.standers > 0 && !this.closing.signal.aborted;
    try {
      while (wanted()) {
        this.standingCampaign = new AbortController();
        try {
          const term = await this.enter({ signal: this.standingCampaign.signal }, true);
          // Back in line as the term ends, not once its leave is answered: the next candidate may
          // hear of its term from that leave first, resign at once and stand again ahead of us.
          await term.over;
        } catch (error) {
          if (error instanceof LockServiceClosedError) {
            // Closed for good, this leadership perhaps made after close(): end as close() does.
            this.closing.abort();
            this.termStarts.complete();
            return;
          }
          if (wanted() && !(error instanceof LeadershipResignedError)) {
            this.logger.warn(
              `Leadership ${JSON.stringify(this.name)}: campaign failed, retrying: ${String(error)}`,
            );
            await wakeUp({}, performance.now() + RETRY_DELAY_MS, this.closing.signal);
          }
        }
      }
    } finally {
      this.standingLoop = undefined;
    }
  }
}
