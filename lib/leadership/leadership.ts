import { Logger } from '@nestjs/common';
import { Observable, Subject } from 'rxjs';
import { LockNotAcquiredError } from '../errors/lock-not-acquired.error';
import { LockServiceClosedError } from '../errors/lock-service-closed.error';
import { LockStoreUnavailableError } from '../errors/lock-store-unavailable.error';
import { MongoLockError } from '../errors/mongo-lock.error';
import type { AcquireOptions } from '../interfaces/lock-options.interface';
import type { MongoLockHandle } from '../lock-handle';
import { MAX_TIMER_MS } from '../options';
import { HeldLeaderTerm, type LeaderTerm } from './leader-term';
import { watchLeader, type LeaderInfo, type LeaderWatchSource } from './leader-watch';

/** Options of `LockService.leadership()`. */
export interface LeadershipOptions {
  /** The term's lease, renewed while leading: how soon another instance takes over after a crash. */
  ttlMs?: number;
}

/** Options of {@link Leadership.campaign}. */
export interface CampaignOptions {
  /** Aborting it gives up the campaign; the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Give up after this long with `LockNotAcquiredError`. Default: wait until elected. */
  timeoutMs?: number;
}

/** What a leadership needs of its service. @internal */
export interface LeadershipHost extends LeaderWatchSource {
  acquire(key: string, options: AcquireOptions): Promise<MongoLockHandle>;
  /** Called at the start of every term (metrics). */
  termBegan(name: string): void;
}

/** One acquisition's wait (a timer's limit, less the acquisition's overrun); the next one follows. */
const LONGEST_WAIT_MS = MAX_TIMER_MS - 60_000;

/** After a failed election attempt (MongoDB unreachable), wait this long before the next. */
const RETRY_DELAY_MS = 1_000;

interface Election {
  readonly won: Promise<HeldLeaderTerm>;
  readonly abort: AbortController;
  /** Campaign calls and `terms$` still waiting for this election. */
  interested: number;
}

/**
 * Leadership of one name: at most one instance leads at a time, candidates are elected in the
 * order they stood, and each term has a fence and a signal that aborts before anyone else can
 * lead. A term is a renewed lock on the name's key; a leader whose renewals fail loses its term
 * at its own lease deadline. One per name and `LockService` (`LockService.leadership()`).
 *
 * @example
 * const orders = locks.leadership('orders-projector', { ttlMs: 10_000 });
 * orders.terms$.subscribe((term) => runProjector({ fence: term.fence, signal: term.signal }));
 */
export class Leadership {
  /** Who leads now, for any instance (this one campaigning or not); `null` while nobody does. */
  readonly leader$: Observable<LeaderInfo | null>;
  /** Emits each term this instance wins; campaigns while subscribed, and resigns when the last subscriber leaves. */
  readonly terms$: Observable<LeaderTerm>;
  private readonly logger = new Logger('Leadership');
  private readonly termStarts = new Subject<LeaderTerm>();
  private live: HeldLeaderTerm | undefined;
  private election: Election | undefined;
  private standing = 0;
  private standingLoop: Promise<void> | undefined;
  private closed = false;

  constructor(
    readonly name: string,
    private readonly key: string,
    private readonly ttlMs: number | undefined,
    private readonly host: LeadershipHost,
  ) {
    this.leader$ = watchLeader(host, key);
    this.terms$ = new Observable<LeaderTerm>((subscriber) => {
      if (this.live?.active) subscriber.next(this.live);
      const subscription = this.termStarts.subscribe(subscriber);
      this.standing += 1;
      this.standingLoop ??= this.stand();
      return () => {
        subscription.unsubscribe();
        this.standing -= 1;
        if (this.standing === 0) void this.resign();
      };
    });
  }

  /** Whether this instance leads now. */
  get isLeader(): boolean {
    return this.live?.active === true;
  }

  /** This instance's current term, while it leads. */
  get term(): LeaderTerm | undefined {
    return this.live?.active ? this.live : undefined;
  }

  /**
   * Resolves with the term once this instance leads (at once if it does). Without `timeoutMs`
   * it waits until elected or aborted. Campaigns of one instance share one place in line.
   */
  campaign(options: CampaignOptions = {}): Promise<LeaderTerm> {
    const { signal, timeoutMs } = options;
    if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs >= 0)) {
      return Promise.reject(
        new MongoLockError(
          `campaign: timeoutMs must be a whole number of ms >= 0, got ${String(timeoutMs)}`,
        ),
      );
    }
    if (this.live?.active) return Promise.resolve(this.live);
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    const election = this.elect();
    election.interested += 1;
    return new Promise<LeaderTerm>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const giveUp = (reason: unknown) => {
        done();
        election.interested -= 1;
        if (election.interested === 0) this.abandon(election, reason);
        reject(reason); // eslint-disable-line @typescript-eslint/prefer-promise-reject-errors -- the caller's own abort reason
      };
      const onAbort = () => giveUp(signal?.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (timeoutMs !== undefined) {
        timer = setTimeout(
          () =>
            giveUp(
              new LockNotAcquiredError(notElectedMessage(this.name, timeoutMs), {
                keys: [this.key],
              }),
            ),
          timeoutMs,
        );
      }
      election.won.then(
        (term) => {
          done();
          resolve(term);
        },
        (error: unknown) => {
          done();
          reject(error); // eslint-disable-line @typescript-eslint/prefer-promise-reject-errors -- passed on as thrown
        },
      );
    });
  }

  /**
   * Ends this instance's term (its signal aborts first) and gives up any election on its way;
   * pending campaigns reject. `terms$` subscribers go back in line.
   */
  async resign(): Promise<void> {
    if (this.election) this.abandon(this.election, new ResignedError(this.name));
    await this.live?.resign();
  }

  /** Resigns for good: at shutdown, before the service stops. @internal */
  async close(): Promise<void> {
    this.closed = true;
    this.termStarts.complete();
    await this.resign();
    await this.standingLoop;
  }

  /** The election in progress, or a new one. */
  private elect(): Election {
    if (this.election) return this.election;
    const abort = new AbortController();
    const election: Election = { abort, interested: 0, won: this.win(abort.signal) };
    this.election = election;
    const forget = () => {
      if (this.election === election) this.election = undefined;
    };
    election.won.then(forget, forget);
    return election;
  }

  /** Ends an election nobody waits for; a later campaign starts a new one, at the back of the line. */
  private abandon(election: Election, reason: unknown): void {
    if (this.election === election) this.election = undefined;
    election.abort.abort(reason);
  }

  private async win(signal: AbortSignal): Promise<HeldLeaderTerm> {
    for (;;) {
      let handle: MongoLockHandle;
      try {
        handle = await this.host.acquire(this.key, {
          ttlMs: this.ttlMs,
          timeoutMs: LONGEST_WAIT_MS,
          renew: true,
          signal,
          metricsLabel: 'leadership',
        });
      } catch (error) {
        if (signal.aborted || !isWorthRetrying(error)) throw error;
        if (error instanceof LockStoreUnavailableError) await delay(RETRY_DELAY_MS, signal);
        continue;
      }
      if (signal.aborted) {
        // Everyone gave up as the election was won: the term is nobody's.
        await handle.release().catch(() => undefined);
        throw signal.reason;
      }
      const term = new HeldLeaderTerm(this.name, handle);
      this.live = term;
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
    try {
      while (this.standing > 0 && !this.closed) {
        let term: LeaderTerm;
        try {
          term = await this.campaign();
        } catch (error) {
          if (error instanceof LockServiceClosedError) return;
          if (this.standing > 0 && !this.closed && !isResignation(error)) {
            this.logger.warn(
              `Leadership ${JSON.stringify(this.name)}: campaign failed, retrying: ${String(error)}`,
            );
            await delay(RETRY_DELAY_MS);
          }
          continue;
        }
        await (term as HeldLeaderTerm).ended;
      }
    } finally {
      this.standingLoop = undefined;
    }
  }
}

function isWorthRetrying(error: unknown): boolean {
  return error instanceof LockNotAcquiredError || error instanceof LockStoreUnavailableError;
}

/** Why a campaign in progress ended when its instance resigned. */
class ResignedError extends MongoLockError {
  constructor(name: string) {
    super(`Leadership ${JSON.stringify(name)}: resigned before it was won`);
  }
}

function isResignation(error: unknown): boolean {
  return error instanceof ResignedError;
}

function notElectedMessage(name: string, timeoutMs: number): string {
  return `Leadership ${JSON.stringify(name)} was not won within ${timeoutMs} ms`;
}

function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
