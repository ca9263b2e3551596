// Every message between the benchmark suites (bench/run.ts) and their worker processes
// (bench/worker.ts): operation → [argument, reply]. One worker process serves every kind of
// benchmark; the operation it is started with says which:
//   startVariants  every compared lock library, one driven at a time (`use`): hand-offs,
//                  contended slices, pings and the change-event floor;
//   startModes     one LockService looping in a lock mode (`modeLoop`), for the modes suite;
//   scale          many waiters in one LockService, in a worker of its own (--expose-gc).
import type { VariantName } from './adapters/bench-lock';

export interface ContendArgs {
  key: string;
  workers: number;
  /** Shared-clock time at which every process starts. */
  startAt: number;
  /**
   * Run first and not counted: each process's first join of the key's line, and more of them
   * with more processes, would otherwise weigh on a short slice.
   */
  warmupMs: number;
  /** The counted window after the warm-up. */
  durationMs: number;
  criticalSectionMs: number;
  timeoutMs: number;
}

export interface ContendResult {
  /** Sections completed while the window was open. */
  sections: number;
  /** Waits that gave up, over the whole slice (warm-up and drain included). */
  failures: number;
  /** Commands the variant in use sent from this process in the window, by name. */
  commands: Record<string, number>;
  /** CPU time (user + system, `process.cpuUsage()`) this process used in the window, in µs. */
  cpuMicros: number;
}

export interface CommandCounts {
  acquire: Record<string, number>;
  release: Record<string, number>;
}

/** How one mode loop takes the key: the lock-mode options of `LockService.acquire`. */
export interface ModeOptions {
  mode?: 'exclusive' | 'shared';
  permits?: number;
  weight?: number;
}

export interface ModeLoopArgs {
  key: string;
  /** Concurrent loops in this process (each an `acquire` → hold → `release` loop). */
  workers: number;
  options: ModeOptions;
  /** Shared-clock time at which every process starts, and how long new requests are made. */
  startAt: number;
  durationMs: number;
  /** How long a section holds the key. */
  holdMs: number;
  /**
   * Pause between one loop's sections, a random value in [min, max] ms: 0 for back to back
   * (readers, narrow permits), more for a requester that asks now and then (the writer).
   */
  gapMs: [number, number];
  timeoutMs: number;
  ttlMs: number;
  /** Record when the first attempt of each acquisition got its reply (one worker only). */
  recordFirstReply?: boolean;
}

/**
 * One section, on the shared clock (ms): asked, acquire resolved, release sent. `firstReplyAt`
 * (when asked for): when the acquisition's first command (its join) got its reply; a waiting
 * call's entry is in the key's line by then.
 */
export type SectionRecord = [
  askedAt: number,
  acquiredAt: number,
  releaseAt: number,
  firstReplyAt?: number,
];

export interface ModeLoopResult {
  sections: SectionRecord[];
  /** Acquisitions that failed (timeouts, errors), with the first few messages. */
  failures: number;
  errors: string[];
  /** Commands this process sent during the run, by name. */
  commands: Record<string, number>;
  /** Requests in flight when the window ended and finished after it (their sections are kept). */
  finishedLate: number;
}

export interface ScaleArgs {
  uri: string;
  dbName: string;
  keys: number;
  waitersPerKey: number;
  /** How many held keys are released one by one to count attempts per release. */
  releases: number;
}

export interface ScaleResult {
  waiters: number;
  keys: number;
  /** Commands (findAndModify) the waiting service sent until every key had its entry in line. */
  initialAttempts: number;
  /** Commands per second while everyone is parked and nothing is released (entry renewals). */
  parkedAttemptsPerSecond: number;
  /**
   * Bytes on the wire per second and key while parked, over one renewal period of the waiting
   * entries (a third of their lease): one renewal of every key's entry.
   */
  parkedBytesPerSecondPerKey: number;
  parkedWindowMs: number;
  /**
   * Joins among them: each one sent again because its first try was not answered within
   * `operationTimeoutMs` (a server starved of CPU); none on a server that keeps up.
   */
  parkedJoins: number;
  changeStreamsOpened: number;
  changeStreamsOpenAtPeak: number;
  serverCursorsOpenAtPeak: number | null;
  attemptsPerRelease: number;
  heapBytesPerWaiter: number;
  rssBytesPerWaiter: number;
  cancelMs: number;
  /** Waits that failed before they were cancelled (a command past its timeout, say). */
  failedWaits: number;
}

type Empty = Record<string, never>;

/** What a suite can ask of a worker process, and the reply to each. */
export type WorkerOps = {
  /** Connects and prepares every variant; `use` picks the one later calls drive. */
  startVariants: [{ variants: VariantName[]; uri: string; dbName: string }, { pid: number }];
  use: [{ variant: VariantName }, { variant: VariantName }];
  hold: [{ key: string; timeoutMs: number }, { at: number }];
  startWaiting: [{ key: string; timeoutMs: number }, { at: number }];
  awaitAcquired: [{ key: string }, { at: number }];
  release: [{ key: string }, { at: number }];
  contend: [ContendArgs, ContendResult];
  ping: [{ count: number }, { samples: number[] }];
  /** The change-event floor (`measureEventFloor`): the watcher's next event is awaited. */
  watchRelay: [Empty, { at: number }];
  relayWrite: [Empty, { at: number }];
  awaitRelay: [Empty, { at: number }];
  countCommands: [{ key: string }, CommandCounts];
  startModes: [{ uri: string; dbName: string }, { pid: number }];
  modeLoop: [ModeLoopArgs, ModeLoopResult];
  scale: [ScaleArgs, ScaleResult];
  /** Closes whatever the worker started. */
  close: [Empty, { closed: true }];
};

/** The handlers of the operations `Op` (each worker module serves some of them). */
export type WorkerHandlers<Op extends keyof WorkerOps> = {
  [K in Op]: (args: WorkerOps[K][0]) => Promise<WorkerOps[K][1]>;
};
