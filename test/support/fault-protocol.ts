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
  /**
   * The worker gives the service a client of its own with command monitoring, and tallies how
   * each lock command ended (`commandTally`); commands of `slowMs` or more count as `slow`.
   */
  monitorCommands?: { slowMs: number };
  /**
   * The worker gives the service its own application client (the one it also uses for its
   * own queries, e.g. `ping`) instead of a `uri`: the app and the module share one client.
   */
  sharedClient?: boolean;
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
  /** A share of acquisitions that wait only `timeoutMs` and give up (their entry leaves). */
  impatient?: { share: number; timeoutMs: number };
  /**
   * Retry a `release()` that MongoDB did not confirm (`LockStoreUnavailableError`) until it
   * is confirmed or the signal aborts, as the README suggests (a release is idempotent).
   */
  retryUnconfirmedRelease?: boolean;
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
  /**
   * Every `acquire` call that failed, with its key and when it was made and settled (shared
   * clock): an attempt of unknown outcome may hold the key, unused, until its call gives up.
   */
  failedCalls?: { key: string; calledAt: number; settledAt: number }[];
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
  /** The handle's local lease deadline when `start` was taken, on the shared clock. */
  deadline: number;
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

/** One `events$` emission as a worker saw it (`watchEvents` / `takeEvents`). */
export interface RecordedLockEvent {
  type: 'acquired' | 'released' | 'deleted';
  key: string;
  /** Fencing token as a decimal string, or null. */
  fence: string | null;
  holderId: string | null;
  /** The event's server time (`LockEvent.at`), epoch ms. */
  serverAt: number;
  /** When the worker received it, on the shared clock. */
  receivedAt: number;
}

export interface RecordedEvents {
  /** When the worker subscribed, on the shared clock (null if it never did). */
  subscribedAt: number | null;
  events: RecordedLockEvent[];
  /** What `events$` errored with, if it did. */
  errors: string[];
  completed: boolean;
  /** The worker's change stream (`LockService.diagnostics`) when this was taken. */
  stream: { open: boolean; established: boolean; opened: number } | null;
}

/** `withLock`: `service.withLock(key, fn)` with `fn` working `workMs` (less if its signal aborts). */
export interface WithLockArgs {
  key: string;
  ttlMs: number;
  timeoutMs: number;
  workMs: number;
  /** Default true (withLock's own default). */
  renew?: boolean;
}

/** How `withLock` settled, with shared-clock times of the call and of its settling. */
export type WithLockOutcome = { calledAt?: number; settledAt: number } & (
  { ok: true; result: string } | { ok: false; errorName: string; message: string }
);

/**
 * `recover`: until every probe passes in one round, or `untilShared` (shared clock): an
 * `acquire` + `release` of `key` through the service, a `ping` on the worker's application
 * client (the service's own with `sharedClient`), and the library's health indicator
 * (`MongoLockHealthIndicator.isHealthy`). Each is bounded by `probeTimeoutMs`.
 */
export interface RecoverArgs {
  key: string;
  untilShared: number;
  probeTimeoutMs: number;
}

/** When (shared clock) each probe first passed, and when all passed in one round (or null). */
export interface RecoverReport {
  lockAt: number | null;
  pingAt: number | null;
  healthAt: number | null;
  allAt: number | null;
  rounds: number;
  /** The last failure of each probe, as `name: message`. */
  lastErrors: string[];
  /** The service's client is the one `ping` used. */
  shared: boolean;
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
  /**
   * Locks the worker's `LockService` still holds (`diagnostics.held`), and how many of them the
   * worker holds by `hold` and has not released: any others are held by nobody.
   */
  heldCount: [Record<string, never>, { library: number; open: number }];
  /** `service.releaseAllHeld()`: how many keys it released while their lease was live. */
  releaseAll: [Record<string, never>, { released: number; calledAt: number; settledAt: number }];
  /** How the lock commands ended so far (`StartArgs.monitorCommands`), by `<kind>:<outcome>`. */
  commandTally: [Record<string, never>, Record<string, number>];
  /** Subscribes to `service.events$` (only `keys`, when given) and records what it emits. */
  watchEvents: [{ keys?: string[] }, { subscribedAt: number }];
  /** What `watchEvents` recorded so far; `unsubscribe` ends the subscription. */
  takeEvents: [{ unsubscribe?: boolean }, RecordedEvents];
  withLock: [WithLockArgs, WithLockOutcome];
  recover: [RecoverArgs, RecoverReport];
};

/** What a worker pushes to the parent unasked. */
export type WorkerEvent = { type: 'section'; section: SectionRecord };
