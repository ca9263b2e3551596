import { LockNotAcquiredError } from '../errors/lock-not-acquired.error';
import { LockStoreUnavailableError } from '../errors/lock-store-unavailable.error';
import { formatMs } from '../util/durations';
import type { HeldLeaderTerm } from './leader-term';

/** A `campaign()` call or `terms$` waiting for an election; it leaves when it gives up. */
export interface ElectionWaiter {
  /** A `campaign()` call, not the `terms$` standing loop. */
  readonly caller: boolean;
  /** Waits past the first answer (any but `timeoutMs: 0`). */
  readonly patient: boolean;
  won(term: HeldLeaderTerm): void;
  failed(error: unknown): void;
}

/** This instance's one attempt to be elected, shared by its campaigns. */
export interface Election {
  /** Told of the outcome; a campaign that gives up leaves (an election may run for weeks). */
  readonly waiters: Set<ElectionWaiter>;
  /** Settles when the first attempt is answered; no campaign times out before that. */
  readonly firstAnswer: Promise<void>;
  /** Settles when the join is: a campaign that waits times out from it, not from a try's. */
  readonly joinAnswer: Promise<void>;
  readonly abort: AbortController;
  /**
   * Set while MongoDB's silence keeps the election back: its last attempt failed as unreachable
   * (`cause`), or its join has gone unanswered as long as a reply may take. Cleared by an answer.
   */
  silence?: { cause?: unknown };
}

/** What a candidate of leadership `name` (on `key`) is told when it gives up after `timeoutMs`. */
export interface CampaignEnd {
  name: string;
  key: string;
  timeoutMs: number;
}

/**
 * A campaign's timeout, as an acquisition's: `LockStoreUnavailableError` when MongoDB's silence
 * is why it was not elected, else `LockNotAcquiredError` (`cause`: why a try's answer was no).
 */
export function campaignTimedOut(
  { name, key, timeoutMs }: CampaignEnd,
  silence: Election['silence'],
  cause?: unknown,
): Error {
  if (silence) {
    const why =
      silence.cause instanceof Error ? `; the last try failed: ${silence.cause.message}` : '';
    return new LockStoreUnavailableError(
      `MongoDB did not answer the campaign for leadership ${JSON.stringify(name)} within ` +
        `${formatMs(timeoutMs)}${why}`,
      silence.cause === undefined ? undefined : { cause: silence.cause },
    );
  }
  const message = `Leadership ${JSON.stringify(name)} was not won within ${timeoutMs} ms`;
  return new LockNotAcquiredError(message, { keys: [key], cause });
}
