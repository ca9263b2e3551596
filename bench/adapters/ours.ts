import type { MongoClient } from 'mongodb';
import { LockService } from '../../lib';
import type { MongoLockModuleOptions } from '../../lib/interfaces';
import type { BenchLock, VariantName } from './bench-lock';

/**
 * How each of our variants waits: on the change stream (the defaults), or polling at a fixed
 * interval. A service's stream opens in start() and stays open until close(), so in the shape
 * matrix `ours` and `ours-local-off` each keep an idle stream open during the other's slices:
 * the server's CPU per section carries that alike for both.
 */
const waitingOptions: Partial<Record<VariantName, Partial<MongoLockModuleOptions>>> = {
  ours: {},
  'ours-poll-10ms': { changeStreams: 'off', pollIntervalMs: 10, maxPollIntervalMs: 10 },
  'ours-poll-100ms': { changeStreams: 'off', pollIntervalMs: 100, maxPollIntervalMs: 100 },
  // Every hand-off through the key's line, as between processes: whether callers of one process
  // taking over their entry without a write pays (issue: ≥ 1.5× in some shape).
  'ours-local-off': { localHandOff: false },
};

/** A lease long enough that no benchmark waiter is ever freed by expiry instead of release. */
const benchTtlMs = 30_000;

export async function createOurLock(
  variant: VariantName,
  connection: { uri: string; dbName: string; client?: MongoClient },
): Promise<BenchLock & { service: LockService }> {
  const service = new LockService({
    ...(connection.client ? { client: connection.client } : { uri: connection.uri }),
    dbName: connection.dbName,
    ...waitingOptions[variant],
  });
  await service.start();
  return {
    service,
    async acquire(key, timeoutMs) {
      const handle = await service.acquire(key, { ttlMs: benchTtlMs, timeoutMs, renew: false });
      return { release: () => handle.release() };
    },
    close: () => service.close(),
  };
}
