/**
 * What the document-commit fault scenario (parent) asks of its worker processes
 * (`fault-document-worker.ts`), and what they report, over IPC as JSON.
 */

export interface DocumentWorkerStartArgs {
  uri: string;
  dbName: string;
  /** The collection holding the contended document. */
  collection: string;
  label: string;
  /** Extra `MongoLockModuleOptions` (plain JSON values only), e.g. polling instead of change streams. */
  options?: Record<string, unknown>;
}

export interface DocumentWorkerStarted {
  holderId: string;
  pid: number;
  /** Directory the worker loaded the library from (`FAULT_LIB_DIR`, or the repository's `lib`). */
  libDir: string;
}

export interface DocumentContendArgs {
  /** `_id` of the one document every process locks and commits to. */
  id: string;
  ttlMs: number;
  /** Work between acquisition and commit, drawn uniformly from [min, max] (below the lease). */
  workMinMs: number;
  workMaxMs: number;
  /** Stop starting sections at this time (shared clock). */
  stopAt: number;
}

export interface DocumentContendStats {
  sections: number;
  committed: number;
  /** Commits rejected with `LockLostError`. */
  lost: number;
  /** Acquisitions that timed out (`LockNotAcquiredError`). */
  timeouts: number;
  /** Anything else: each one is a violation. */
  errors: string[];
}

/** Sent as soon as `acquire` resolved, before the work starts: the parent may pause or kill now. */
export interface DocumentAcquiredEvent {
  type: 'acquired';
  worker: string;
  holder: string;
  pid: number;
  fence: string;
  /** Shared clock, just after `acquire` resolved. */
  start: number;
  /** The handle's local deadline, on the shared clock, at acquisition. */
  deadline: number;
  workMs: number;
  /**
   * The worker was armed (`arm`): instead of sleeping, it spins on the clock until it sees a
   * jump (it was frozen and thawed), then calls `commit()` without yielding to the event loop.
   */
  armed: boolean;
  /** `counter` of the document as the acquiring round trip returned it. */
  seen: number;
}

/** Sent once the commit settled. */
export interface DocumentCommitEvent {
  type: 'commit';
  worker: string;
  holder: string;
  pid: number;
  fence: string;
  start: number;
  seen: number;
  /** Shared clock, just before `commit()` was called: the end of the holder's work. */
  commitCalledAt: number;
  /** Local deadline read just before `commit()` was called (or when the signal aborted). */
  deadline: number;
  /** When the handle's signal aborted, if it did (shared clock). */
  signalAt: number | null;
  /** The signal had already aborted when `commit()` was called: refused locally, no round trip. */
  abortedBeforeCall: boolean;
  /** An armed section saw the clock jump (it was frozen) before it called `commit()`. */
  thawed: boolean;
  outcome: 'committed' | 'lost';
  /** Name and message of the error `commit()` rejected with, if it did. */
  error: string | null;
  settledAt: number;
}

export type DocumentWorkerEvent = DocumentAcquiredEvent | DocumentCommitEvent;

/** One entry of the document's `commits` log, pushed by each commit that landed. */
export interface CommitLogEntry {
  worker: string;
  pid: number;
  fence: string;
  seen: number;
}

export type DocumentWorkerOps = {
  start: [DocumentWorkerStartArgs, DocumentWorkerStarted];
  contend: [DocumentContendArgs, DocumentContendStats];
  /** The next section spins instead of sleeping (see {@link DocumentAcquiredEvent.armed}). */
  arm: [{ armed: boolean }, { armed: boolean }];
  close: [Record<string, never>, { closed: boolean }];
};
