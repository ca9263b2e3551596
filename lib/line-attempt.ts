import { LockStoreUnavailableError } from './errors/lock-store-unavailable.error';
import { quoteLockKey } from './keys/lock-key';
import { LineEntryState } from './line-entry';
import type { EntryFollowers } from './line-handover';
import { notAcquired } from './line-refusals';
import type { AttemptTarget, HeldDocument } from './store/line/line-commands';
import type { LineKind, LinePlace } from './store/line/line-document';
import { unansweredError } from './store/bounded-command';
import { isPassingFailure, isStoreUnavailableError } from './store/mongo-error-codes';
import { formatMs } from './util/durations';
import { settledBy, sleep } from './util/timers';
import type { LineWaiters } from './waiting/line-waiters';

export interface LineAcquireRequest {
  key: string;
  kind: LineKind;
  ttlMs: number;
  /** 0: only if free now (`tryAcquire`). */
  timeoutMs: number;
  /** Monotonic time by which the call gives up; default: `timeoutMs` from now. */
  deadline?: number;
  signal?: AbortSignal;
  scope?: string;
  /** A document lock's conditions on its document. */
  target?: AttemptTarget;
  /** `false`: never takes over, nor hands over, an entry here (`line-handover.ts`). */
  handOff?: false;
  /** Told once if the first join's reply leaves the call waiting in line. */
  queued?: () => void;
}

/**
 * One call's acquisition of one key, shared by its commands, waits and turn as a follower.
 * Methods, not closures: a process may park thousands.
 */
export class LineAttempt {
  readonly entry: LineEntryState;
  /** Our place in line as last read ({@link placed}); undefined until a reply placed us. */
  place: (LinePlace & { document?: HeldDocument }) | undefined;
  /** When {@link place} was read (monotonic ms): its lease times count from then. */
  private placeReadAt = 0;
  /** Callers here that will take our entry over, while it waits (`line-handover.ts`). */
  followers: EntryFollowers | undefined;
  /** Told to make the next entry for the callers queued behind it (`line-handover.ts`). */
  opens: EntryFollowers | undefined;
  /**
   * When the first join of our token that may have landed was sent: our lease counts from it,
   * not from the call (nor from a retry, whose reply may be that join's stored image).
   */
  joinSentAt = 0;
  /** The store's last failure of a command while MongoDB was unavailable: a silence's cause. */
  private lastUnavailable: unknown;

  constructor(
    readonly request: LineAcquireRequest,
    readonly deadline: number,
    waiters: LineWaiters,
  ) {
    this.entry = new LineEntryState(waiters, request.key);
  }

  /** A reply's place for us, just read. */
  placed(place: NonNullable<LineAttempt['place']>): void {
    this.place = place;
    this.placeReadAt = performance.now();
  }

  /** At the deadline: the holder we could hold after, as last seen, and its lease left then. */
  timedOut(): Error {
    const place = this.place;
    const leftMs = place && Math.max(0, place.holdsInMs - (performance.now() - this.placeReadAt));
    return notAcquired(this.request, place?.blockerId, leftMs);
  }

  /**
   * A command unanswered `lateReplyMs` past the deadline (or failed so, `cause`: by default the
   * last failure {@link retried} saw): MongoDB's silence is why, whether or not an earlier reply
   * placed us (a wait with nothing to ask fails by {@link timedOut}).
   */
  unanswered(lateReplyMs: number, cause: unknown = this.lastUnavailable): Error {
    const more = lateReplyMs > 0 ? ` and ${formatMs(lateReplyMs)} more for its reply` : '';
    const why = cause instanceof Error ? `; the last try failed: ${cause.message}` : '';
    return new LockStoreUnavailableError(
      `MongoDB did not answer the acquisition of ${quoteLockKey(this.request.key)} within ` +
        `${formatMs(this.request.timeoutMs)}${more}${why}`,
      cause === undefined ? undefined : { cause },
    );
  }

  /**
   * Retries `command` after a pause while MongoDB is unavailable and time remains: every command
   * goes by our token, so a retry of one that landed finds its own work done.
   */
  async retried<T>(command: () => Promise<T>): Promise<T> {
    const { signal } = this.request;
    for (let delayMs = 50; ; delayMs = Math.min(delayMs * 2, 1_000)) {
      try {
        const answer = await command();
        // A cause names the tries just before a silence, not one answered since.
        this.lastUnavailable = undefined;
        return answer;
      } catch (error) {
        // An aborted call sends nothing more: a join landing later would be nobody's. Our
        // entry known joined, a passing refusal of its renewal or read is retried too.
        const joined = this.entry.state === 'joined';
        const passing = joined ? isPassingFailure(error) : isStoreUnavailableError(error);
        if (!passing || signal?.aborted) throw error;
        this.lastUnavailable = error;
        // Out of time: named by the key, with the store's error as the cause.
        if (performance.now() + delayMs >= this.deadline) throw this.unanswered(0, error);
        await sleep(delayMs, false);
        signal?.throwIfAborted();
      }
    }
  }

  /**
   * A try's join, or `LockStoreUnavailableError` once its reply is `replyMs` late; not sent
   * when that time is already spent (waiting for a leave of ours), as it could only come late.
   */
  tried<T>(
    join: () => Promise<T>,
    replyMs: number | undefined,
    monitorFailure?: () => Error | undefined,
  ): Promise<T> {
    if (replyMs === undefined) return join();
    const { key, deadline, signal } = this.request;
    const late = (unsent = false) =>
      unansweredError(
        unsent
          ? `The attempt on ${JSON.stringify(key)} was not sent: its ` +
              `${formatMs(replyMs)} for MongoDB's replies had run out`
          : `MongoDB did not answer the attempt on ${JSON.stringify(key)} within ` +
              `${formatMs(replyMs)}; a late win is given back`,
        monitorFailure?.(),
      );
    // From the call's start: a try of several keys has one budget, not one per key.
    const callEnd = (deadline ?? performance.now()) + replyMs;
    if (performance.now() >= callEnd) return Promise.reject(late(true));
    return settledBy(join(), callEnd, signal, () => late());
  }
}
