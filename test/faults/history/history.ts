/**
 * What a fault scenario records. Times are milliseconds on the clock shared by all processes
 * of one machine (`sharedClockMs()`), so intervals from different processes can be compared.
 */

/** How an acquisition ended, as its holder saw it. */
export type SectionOutcome =
  /** `release()` succeeded. */
  | 'released'
  /** The holder was told of the loss (signal, `lost$`, or `release()` threw `LockLostError`). */
  | 'lost'
  /** No outcome was reported: the holder died, or a bug leaked the acquisition. */
  | 'open';

/** One critical section: from the moment `acquire` resolved to the moment work stopped. */
export interface SectionRecord {
  key: string;
  /** Fencing token as a decimal string (bigint does not cross IPC as JSON). */
  fence: string;
  /** `LockService.holderId` of the instance that held the lock. */
  holder: string;
  /** Label of the logical worker (process and worker index), for messages. */
  worker: string;
  pid: number;
  /** Taken after `acquire` resolved: the real grant happened earlier. */
  start: number;
  /** Taken before `release()` was sent, or when work stopped on loss: the real lease ends later. */
  end: number | null;
  outcome: SectionOutcome;
  /**
   * The holder's own local lease deadline (`handle.expiresAt` on the shared clock), read just
   * before `release()` was sent, or when the signal aborted: the moment its signal must abort
   * at the latest. `null` when unknown (an open record the worker never completed); the
   * checker then takes the holder's work as protected until it ended.
   */
  deadline: number | null;
  /** When the handle's `signal` aborted, on the shared clock; `null` if it never did. */
  signalAt: number | null;
  /** How many times `release()` was called (more than 1: unconfirmed releases were retried). */
  releaseTries?: number;
  /** Name of the error the last `release()` call threw (`LockLostError`, ...), if it threw. */
  releaseError?: string;
}

/** An instance the scenario killed on purpose. */
export interface DeadInstance {
  holder: string;
  pid: number;
  diedAt: number;
}

/** A lock document read directly from the collection when the scenario ended. */
export interface FinalLockState {
  key: string;
  holder: string | null;
  /** Whether an unexpired lease holds it, by the server clock. */
  held: boolean;
  /** When it was read, on the shared clock. */
  observedAt: number;
  /** The lease as the server saw it then, for a violation's message: fence, time left. */
  lease?: { fence: string; remainingMs: number };
}

/** A process the scenario froze on purpose (SIGSTOP) and, if it did, thawed again (SIGCONT). */
export interface PauseRecord {
  pid: number;
  /** When SIGSTOP was sent, on the shared clock. */
  from: number;
  /** When SIGCONT was sent; `null` if the process was never resumed. */
  to: number | null;
}

export interface History {
  sections: SectionRecord[];
  deaths: DeadInstance[];
  /** Pauses the scenario caused: the only excuse for a holder told of its loss late. */
  pauses: PauseRecord[];
  finalLocks: FinalLockState[];
}

export type ViolationKind =
  | 'overlap'
  /** A semaphore's permits held at one instant exceed its count (`modes-checker.ts`). */
  | 'over-capacity'
  | 'told-late'
  | 'fence-order'
  | 'unreleased'
  | 'held-by-dead'
  | 'leaked-lock'
  | 'orphaned-lease'
  | 'scenario';

export interface Violation {
  kind: ViolationKind;
  key: string;
  detail: string;
}

export function emptyHistory(): History {
  return { sections: [], deaths: [], pauses: [], finalLocks: [] };
}
