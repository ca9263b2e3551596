import type { Collection } from 'mongodb';
import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { LeaseObservation } from '../history/orphans';
import { readLiveLeases } from './line-leases';

/** Longest one read may take on the server; a stuck server must not stall the sampler's stop. */
const READ_MAX_TIME_MS = 1000;

/**
 * Reads the lock collection's lines every `intervalMs` while a scenario runs and keeps every
 * holder it sees (`readLiveLeases`, as `readFinalLocks` judges it), with its fence:
 * `findOrphanedLeases` then looks for leases that no section accounts for.
 */
export class LeaseSampler {
  readonly observations: LeaseObservation[] = [];
  /** Reads that answered, reads that failed, and the longest time between two answers. */
  reads = 0;
  failures = 0;
  maxGapMs = 0;
  private stopped = false;
  private wake: (() => void) | undefined;
  private readonly loop: Promise<void>;

  constructor(
    private readonly collection: Collection,
    private readonly intervalMs: number,
  ) {
    this.loop = this.run();
  }

  /** Stops sampling; resolves once the read under way (if any) has settled. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
  }

  summary(): string {
    return (
      `lease sampler: ${this.reads} reads every ${this.intervalMs} ms, ${this.failures} failed, ` +
      `longest gap ${Math.round(this.maxGapMs)} ms`
    );
  }

  private async run(): Promise<void> {
    let lastAnswer: number | undefined;
    while (!this.stopped) {
      const sentAt = sharedClockMs();
      try {
        const { leases } = await readLiveLeases(this.collection, { maxTimeMS: READ_MAX_TIME_MS });
        const receivedAt = sharedClockMs();
        this.reads += 1;
        if (lastAnswer !== undefined)
          this.maxGapMs = Math.max(this.maxGapMs, receivedAt - lastAnswer);
        lastAnswer = receivedAt;
        for (const lease of leases) {
          this.observations.push({
            key: lease.key,
            fence: lease.fence,
            holder: lease.holder,
            sentAt,
            receivedAt,
          });
        }
      } catch {
        this.failures += 1;
      }
      await this.sleep(Math.max(10, sentAt + this.intervalMs - sharedClockMs()));
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }
}
