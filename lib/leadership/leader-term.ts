import { filter, type Observable } from 'rxjs';
import { LeadershipResignedError } from '../errors/leadership-resigned.error';
import type { LockLostError } from '../errors/lock-lost.error';
import { MongoLockError } from '../errors/mongo-lock.error';
import type { MongoLockHandle } from '../lock-handle';
import { checkedAtEveryLook } from '../util/checked-signal';

/** One term of leadership: from election to resignation or loss. */
export interface LeaderTerm {
  /** The leadership's name. */
  readonly name: string;
  /** Fencing token of the term: strictly greater than every earlier term's of this name. */
  readonly fence: bigint;
  /** When this instance was elected (its own clock). */
  readonly since: Date;
  /** Aborts when the term ends for any reason, before another instance can be elected. */
  readonly signal: AbortSignal;
  /** The local lease deadline: the signal aborts then unless a renewal gets through. */
  readonly expiresAt: Date;
  /** Emits the loss once if the term was lost (not resigned), then completes. */
  readonly lost$: Observable<LockLostError>;
  /** Whether the term is still on (its signal has not aborted). */
  readonly active: boolean;
  /** Ends the term and lets the next candidate lead. Idempotent. */
  resign(): Promise<void>;
}

/** A term over the renewed lock handle that won the election. @internal */
export class HeldLeaderTerm implements LeaderTerm {
  readonly fence: bigint;
  readonly since = new Date();
  readonly lost$: Observable<LockLostError>;
  /** Resolves when the term is over and its lock no longer held. */
  readonly ended: Promise<void>;
  /** Resolves when the term is over (its signal aborted), its lock perhaps still being left. */
  readonly over: Promise<void>;
  private readonly ending = new AbortController();
  private resigning: Promise<void> | undefined;
  /** Set at the first `resign()`. */
  private lostBeforeResigning: boolean | undefined;

  constructor(
    readonly name: string,
    private readonly handle: MongoLockHandle,
  ) {
    this.fence = handle.fence;
    this.over = new Promise((resolve) =>
      this.ending.signal.addEventListener('abort', () => resolve(), { once: true }),
    );
    // A resigned term is not lost: a release MongoDB never confirmed ends with the lease.
    this.lost$ = handle.lost$.pipe(filter(() => this.lostBeforeResigning !== false));
    // At once, with the loss as the reason (the end of the hold below comes a turn later).
    const onLost = () => this.ending.abort(handle.signal.reason);
    if (handle.signal.aborted) onLost();
    else handle.signal.addEventListener('abort', onLost, { once: true });
    // Reading the term's signal checks the handle's, so a deadline passed in a pause ends it.
    checkedAtEveryLook(this.ending.signal, () => void handle.signal.aborted);
    this.ended = handle.done.then(() => {
      handle.signal.removeEventListener('abort', onLost);
      this.ending.abort(new MongoLockError(`Leadership ${JSON.stringify(name)}: the term ended`));
    });
  }

  get signal(): AbortSignal {
    return this.ending.signal;
  }

  get active(): boolean {
    return !this.signal.aborted;
  }

  get expiresAt(): Date {
    return this.handle.expiresAt;
  }

  /** `reason`: the signal's (at shutdown, `LockServiceClosedError`). */
  resign(reason: Error = new LeadershipResignedError(this.name)): Promise<void> {
    // The signal first: work under the term stops before the next leader can be elected.
    this.ending.abort(reason);
    this.lostBeforeResigning ??= this.handle.lost;
    this.resigning ??= this.handle.release().catch(() => undefined);
    return this.resigning;
  }
}
