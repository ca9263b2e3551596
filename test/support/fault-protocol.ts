import type { SectionRecord } from '../faults/history/history';

/** Operations the fault suite (parent) asks of its worker processes, over IPC as JSON. */

export interface StartArgs {
  uri: string;
  dbName: string;
  collectionName: string;
  /** Extra `MongoLockModuleOptions` (plain JSON values only). */
  options?: Record<string, unknown>;
  /** Name of the worker in records and messages. */
  label: string;
}

export interface StartedInfo {
  holderId: string;
  pid: number;
  /** Directory the worker loaded the library from (`FAULT_LIB_DIR`, or the repository's `lib`). */
  libDir: string;
}

/** Random hold times: mostly short, a share of them longer than the lease. */
export interface HoldPlan {
  shortMaxMs: number;
  longShare: number;
  longMinMs: number;
  longMaxMs: number;
}

export interface ContendArgs {
  keys: string[];
  workers: number;
  ttlMs: number;
  timeoutMs: number;
  hold: HoldPlan;
  /** Share of acquisitions made with auto-renewal on. */
  renewShare: number;
  /** Stop starting sections at this time (shared clock) or after this many, whichever first. */
  stopAt: number;
  maxSections: number;
}

export interface ContendStats {
  sections: number;
  lost: number;
  /** Acquisitions that failed with `LockNotAcquiredError` (their wait timed out). */
  timeouts: number;
  /** Acquisitions that failed with `LockStoreUnavailableError` (the store could not be reached). */
  unavailable: number;
  /**
   * Largest overshoot of an acquisition: over every `acquire` call, the time from the call to
   * its settling (won or failed) minus `timeoutMs`. Negative when every call settled before its
   * timeout; `-timeoutMs` if there was none.
   */
  maxSettleOvershootMs: number;
  /** Any other failure, as text (the first 20). */
  errors: string[];
}

export interface HoldArgs {
  key: string;
  ttlMs: number;
  timeoutMs: number;
  renew: boolean;
}

export interface HeldLock {
  key: string;
  fence: string;
  start: number;
}

export interface FencedWriteArgs {
  key: string;
  value: string;
}

export interface LossReport {
  key: string;
  /** Shared clock time at which each channel told of the loss (null if it did not). */
  signalAt: number | null;
  lostAt: number | null;
}

/** Each operation's argument and result types. */
export type WorkerOps = {
  start: [StartArgs, StartedInfo];
  contend: [ContendArgs, ContendStats];
  hold: [HoldArgs, HeldLock];
  release: [{ key: string }, { outcome: 'released' | 'lost' }];
  waitForLoss: [{ key: string; timeoutMs: number }, LossReport];
  fencedWrite: [FencedWriteArgs, { accepted: boolean; fence: string }];
  close: [Record<string, never>, { closed: true }];
};

/** What a worker pushes to the parent unasked. */
export type WorkerEvent = { type: 'section'; section: SectionRecord };
