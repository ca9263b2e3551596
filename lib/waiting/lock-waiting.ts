import type { Observable } from 'rxjs';
import type { AcquireAttemptWon } from '../store/acquire-attempt';
import { GRANT_LEASE_MS } from '../store/direct-grant';
import type { LockEvent } from '../interfaces/lock-state.interface';
import type { HoldEnd, LockChangeFeed } from './change-feed';
import { KeyQueue } from './key-queue';
import type { KeyWaitRequest, LocalRun, OfferedSuccessor } from './key-queue';
import { waitUntilReleased } from './release-watch';
import type { LeaseProbe } from './release-watch';
import type { WaitTiming } from './wait-timing';
import { waitObservable } from './wait-observable';

/** Keys whose latest hand-off to another process is remembered (oldest forgotten first). */
const GRANTED_ELSEWHERE_KEPT = 1_000;

/**
 * The waiting layer of one `LockService`: a FIFO queue per key, all fed by one change feed.
 *
 * @example
 * const won = await waiting.acquireKey('orders:42', { attempt, deadline, timeoutMs, signal });
 */
export class LockWaiting {
  private readonly queues = new Map<string, KeyQueue>();
  /** Local runs going on, by key (see `MAX_LOCAL_TRANSFERS`). */
  private readonly localRuns = new Map<string, LocalRun>();
  /** When this process's releases last handed each key to another process (monotonic ms). */
  private readonly grantedElsewhere = new Map<string, number>();

  constructor(
    private readonly feed: LockChangeFeed,
    /** This process's holder id. */
    private readonly holderId: string,
    private readonly timing: WaitTiming,
  ) {}

  /** Callers waiting in this process, over all keys (diagnostics and tests). */
  get waiterCount(): number {
    let count = 0;
    for (const queue of this.queues.values()) count += queue.size;
    return count;
  }

  /** Waits in `key`'s local queue until an attempt wins, the deadline passes, or the signal aborts. */
  acquireKey(key: string, request: KeyWaitRequest): Promise<AcquireAttemptWon> {
    let queue = this.queues.get(key);
    if (!queue) {
      const created = new KeyQueue(key, {
        feed: this.feed,
        holderId: this.holderId,
        timing: this.timing,
        onEmpty: () => {
          if (this.queues.get(key) === created) this.queues.delete(key);
        },
        heldElsewhere: this.takeGrantedElsewhere(key),
        localRun: {
          current: () => this.localRuns.get(key),
          add: () => {
            const run = this.localRuns.get(key);
            if (run) run.transfers += 1;
            else this.localRuns.set(key, { transfers: 1, startedAt: performance.now() });
          },
          reset: () => this.localRuns.delete(key),
        },
      });
      this.queues.set(key, (queue = created));
    }
    return queue.enqueue(request);
  }

  waitForRelease(
    key: string,
    probe: () => Promise<LeaseProbe>,
    signal: AbortSignal,
  ): Promise<void> {
    return waitUntilReleased(key, this.feed, this.timing, probe, signal);
  }

  /**
   * {@link waitForRelease} as a cold Observable: `prepare` (run on subscription) names the key
   * and how to probe it; emits once and completes when the key is free; unsubscribing or
   * `closing` ends the wait.
   */
  released$(
    prepare: () => Promise<{ key: string; probe: () => Promise<LeaseProbe> }>,
    closing: AbortSignal,
  ): Observable<void> {
    return waitObservable(async (signal) => {
      const { key, probe } = await prepare();
      await this.waitForRelease(key, probe, signal);
    }, closing);
  }

  /**
   * The head of `key`'s queue, if a release may pass the lock to it (`KeyQueue.takeSuccessor`).
   * A release that passes it to nobody here ends the key's local run.
   */
  takeSuccessor(key: string): OfferedSuccessor | undefined {
    const offered = this.queues.get(key)?.takeSuccessor();
    if (!offered) this.localRuns.delete(key);
    return offered;
  }

  /**
   * Tells local waiters at once that this process's hold of `key` ended, and how (with a grant,
   * a lower bound of its fence, if known).
   */
  notifyHoldEnded(key: string, how: HoldEnd, grantFence?: bigint): void {
    this.grantedElsewhere.delete(key);
    if (how === 'granted-elsewhere') {
      this.grantedElsewhere.set(key, performance.now());
      if (this.grantedElsewhere.size > GRANTED_ELSEWHERE_KEPT) {
        this.grantedElsewhere.delete(this.grantedElsewhere.keys().next().value as string);
      }
    }
    this.feed.notifyHoldEnded(key, how, grantFence);
  }

  /** Whether this process handed `key` to another one within a grant lease (and forgets it). */
  private takeGrantedElsewhere(key: string): boolean {
    const at = this.grantedElsewhere.get(key);
    this.grantedElsewhere.delete(key);
    return at !== undefined && performance.now() - at < GRANT_LEASE_MS;
  }

  /** Every acquisition and release seen on the lock collection (see `LockService.events$`). */
  watchEvents(listener: (event: LockEvent) => void): () => void {
    return this.feed.watchEvents(listener);
  }

  /** False once the feed polls instead of watching change events (a standalone server). */
  get streaming(): boolean {
    return this.feed.streaming;
  }

  /** The change feed's state, for diagnostics. */
  get streamState(): { open: boolean; established: boolean; opened: number } {
    return {
      open: this.feed.streamOpen,
      established: this.feed.streamEstablished,
      opened: this.feed.streamsOpened,
    };
  }

  close(): Promise<void> {
    return this.feed.close();
  }
}
