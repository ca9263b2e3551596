import { Observable } from 'rxjs';
import { LockServiceClosedError } from '../errors/lock-service-closed.error';
import type { LockEvent, LockState } from '../interfaces/lock-state.interface';
import { unrefTimer } from '../util/timers';

/** Who leads a name now, as any instance sees it. */
export interface LeaderInfo {
  /** The leader's `LockService.holderId`. */
  readonly holderId: string;
  /** Its term's fencing token. */
  readonly fence: bigint;
  /**
   * When it stood (joined the key's line), by the server clock: its term began then, or later if
   * it waited as a candidate.
   */
  readonly since: Date;
}

/** What a leader watch reads. @internal */
export interface LeaderWatchSource {
  inspect(key: string): Promise<LockState | null>;
  /** Completes when the service closes; errors only for a start that cannot succeed. */
  readonly events$: Observable<LockEvent>;
  /** False while changes may pass unseen (polling, or the change stream not open yet). */
  eventsFlow(): boolean;
  /** How often to re-read while events do not flow. */
  readonly pollIntervalMs: number;
  /** How often to re-read while they do: a stream reopened afresh has missed what changed. */
  readonly safetyPollIntervalMs: number;
}

/** A lease can end without a change event: re-read this long after it should have. */
const LEASE_END_MARGIN_MS = 50;

function leaderOf(state: LockState | null): LeaderInfo | null {
  if (!state?.held || state.holderId === null || state.acquiredAt === null) return null;
  return { holderId: state.holderId, fence: state.fence, since: state.acquiredAt };
}

function sameLeader(a: LeaderInfo | null, b: LeaderInfo | null): boolean {
  return a === b || (a !== null && b !== null && a.fence === b.fence && a.holderId === b.holderId);
}

/**
 * The leader of `key` now, then only its changes. Re-reads on the key's change events, when the
 * leader's lease should have ended (which makes no event), and on a timer: the poll interval
 * while events do not flow, the safety interval while they do. A failed read is retried; the
 * watch completes with the service.
 */
export function watchLeader(source: LeaderWatchSource, key: string): Observable<LeaderInfo | null> {
  return new Observable<LeaderInfo | null>((subscriber) => {
    let last: LeaderInfo | null | undefined;
    let reading = false;
    let readAgain = false;
    let cancelTimer: (() => void) | undefined;
    let closed = false;

    async function read(): Promise<void> {
      if (closed) return;
      if (reading) {
        readAgain = true;
        return;
      }
      reading = true;
      let nextInMs = source.eventsFlow() ? source.safetyPollIntervalMs : source.pollIntervalMs;
      try {
        const state = await source.inspect(key);
        const leader = leaderOf(state);
        if (!closed && (last === undefined || !sameLeader(last, leader))) {
          last = leader;
          subscriber.next(leader);
        }
        if (state?.held) nextInMs = Math.min(nextInMs, state.remainingMs + LEASE_END_MARGIN_MS);
      } catch (error) {
        // Closed: so is the watch, even when events$, which completes it, failed to start.
        if (error instanceof LockServiceClosedError) return subscriber.complete();
        nextInMs = Math.min(nextInMs, source.pollIntervalMs);
      }
      reading = false;
      if (closed) return;
      if (readAgain) {
        readAgain = false;
        void read();
      } else {
        cancelTimer?.();
        cancelTimer = unrefTimer(() => void read(), nextInMs);
      }
    }

    // It retries a start MongoDB's absence failed on its own; after any other failure, which
    // fails each read too, the reads' timer goes on alone until the service closes.
    const events = source.events$.subscribe({
      next: (event) => {
        if (event.key === key) void read();
      },
      complete: () => subscriber.complete(),
      error: () => undefined,
    });
    void read();
    return () => {
      closed = true;
      cancelTimer?.();
      events.unsubscribe();
    };
  });
}
