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
  timeouts: number;
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
  start: [StartArgs, { holderId: string; pid: number }];
  contend: [ContendArgs, ContendStats];
  hold: [HoldArgs, HeldLock];
  release: [{ key: string }, { outcome: 'released' | 'lost' }];
  waitForLoss: [{ key: string; timeoutMs: number }, LossReport];
  fencedWrite: [FencedWriteArgs, { accepted: boolean; fence: string }];
  close: [Record<string, never>, { closed: true }];
};

/** What a worker pushes to the parent unasked. */
export type WorkerEvent = { type: 'section'; section: SectionRecord };
