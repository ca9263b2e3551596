// What `npm run bench:modes` (bench/modes.ts) asks of its worker processes (bench/modes-worker.ts).

/** How one loop takes the key: the lock-mode options of `LockService.acquire`. */
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
 * (when asked for): when the acquisition's first attempt got its reply; a lost attempt of a
 * waiting call has recorded its reservation by then.
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

export type ModeOps = {
  /**
   * `parkedWaiter`: one more call waits, the whole run, on a key that a second service of the
   * process holds, so this process's change stream stays open between its own waits.
   */
  start: [{ uri: string; dbName: string; parkedWaiter?: boolean }, { pid: number }];
  loop: [ModeLoopArgs, ModeLoopResult];
  close: [Record<string, never>, { closed: true }];
};
