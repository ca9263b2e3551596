/** What the gauges read from one `LockService`: callers waiting and handles holding locks. */
export interface LockLoad {
  readonly waiters: number;
  readonly held: number;
  /** Whether the service leads, per leadership name it stands for. */
  readonly leading: ReadonlyMap<string, boolean>;
}

/** The part of a handle that telemetry watches: when it ends, and whether it was lost. */
export interface HoldSubject {
  /** Resolves once the handle holds nothing any more: released, or lost. */
  readonly done: Promise<void>;
  readonly lost: boolean;
}

/**
 * The few points where the core reports to metrics and traces. Labels are key templates (or
 * the caller's `metricsLabel`), never keys: keys carry ids and would explode cardinality.
 * The store and the waiting layer know nothing of this. @internal
 */
export interface LockTelemetry {
  /**
   * Runs one acquisition call: the `lock.acquire` span, its wait time and outcome, and, once
   * it returns a handle, that handle's hold time and whether it was released or lost.
   */
  acquisition<H extends HoldSubject>(
    label: string,
    keyCount: number,
    startedAt: number,
    acquire: () => Promise<H>,
  ): Promise<H>;
  /** Runs the body of a `@Locked` method under the `lock.hold` span. */
  lockedMethod<T>(label: string, where: string, run: () => Promise<T>): Promise<T>;
  /** Reports a service's load on the gauges until the returned function is called. */
  observeLoad(read: () => LockLoad): () => void;
  /** Counts a term won by this service (labelled by leadership name, which users choose few of). */
  termBegan(name: string): void;
}

/** What every call does without `@opentelemetry/api`: nothing. */
export const NOOP_LOCK_TELEMETRY: LockTelemetry = {
  acquisition: (_label, _keyCount, _startedAt, acquire) => acquire(),
  lockedMethod: (_label, _where, run) => run(),
  observeLoad: () => () => undefined,
  termBegan: () => undefined,
};
