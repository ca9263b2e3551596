import type { Observable } from 'rxjs';

/** What the gauges read from one `LockService`: callers waiting and handles holding locks. */
export interface LockLoad {
  readonly waiters: number;
  readonly held: number;
  /** Whether the service leads, per leadership name it stands for. */
  readonly leading: ReadonlyMap<string, boolean>;
}

/** The part of a handle that telemetry watches. */
export interface HoldSubject {
  /**
   * Completes once the hold's outcome is final: released or lost (a release MongoDB did not
   * confirm is given back in the background, which may yet find the lease gone).
   */
  readonly lost$: Observable<unknown>;
  readonly lost: boolean;
}

/**
 * Where the core reports to metrics and traces. Labels are key templates (or `metricsLabel`),
 * never keys: keys carry ids and would explode cardinality. @internal
 */
export interface LockTelemetry {
  /** Runs one acquisition in a `lock.acquire` span; records its wait, outcome and handle's hold. */
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
  /** Counts a term won, labelled by leadership name (users choose few of them). */
  termBegan(name: string): void;
}

/** What every call does without `@opentelemetry/api`: nothing. */
export const NOOP_LOCK_TELEMETRY: LockTelemetry = {
  acquisition: (_label, _keyCount, _startedAt, acquire) => acquire(),
  lockedMethod: (_label, _where, run) => run(),
  observeLoad: () => () => undefined,
  termBegan: () => undefined,
};
