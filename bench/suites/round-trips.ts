import type { CommandCounts } from '../worker-protocol';
import type { BenchWorker } from '../support/bench-worker';

export interface RoundTripResult {
  /** Commands sent to acquire a key never seen before (the lock document does not exist). */
  acquireNewKey: number;
  /** Commands sent to acquire a free key that was held before (steady state). */
  acquireFreeKey: number;
  release: number;
  /** Command names of the steady-state acquire and release, for the record. */
  breakdown: CommandCounts;
}

const total = (counts: Record<string, number>) =>
  Object.values(counts).reduce((sum, n) => sum + n, 0);

/**
 * Commands on the wire per uncontended acquire and release, counted by the driver's command
 * monitoring in the worker. One warm-up acquisition first, so one-time set-up (indexes,
 * connection handshakes) is not charged to the first lock.
 */
export async function countRoundTrips(worker: BenchWorker): Promise<RoundTripResult> {
  await worker.call('countCommands', { key: 'round-trips:warm-up' });
  const fresh = await worker.call('countCommands', { key: 'round-trips:fresh' });
  const again = await worker.call('countCommands', { key: 'round-trips:fresh' });
  return {
    acquireNewKey: total(fresh.acquire),
    acquireFreeKey: total(again.acquire),
    release: total(again.release),
    breakdown: again,
  };
}
