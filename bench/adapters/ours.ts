import type { MongoClient } from 'mongodb';
import { LockService } from '../../lib';
import type { MongoLockModuleOptions } from '../../lib/interfaces';
import type { BenchLock, VariantName } from './bench-lock';

/** How each of our variants waits: the change stream, or polling at a fixed interval. */
const waitingOptions: Partial<Record<VariantName, Partial<MongoLockModuleOptions>>> = {
  // The stream closes 300 ms after a slice's last wait, before the next variant's counted
  // window opens (500 ms start + the warm-up): an idle stream's reads, and the server waking
  // it for every write, would otherwise fall into another variant's slice.
  ours: { engine: 'v1', changeStreams: 'auto', streamIdleMs: 300 },
  'ours-poll-10ms': {
    engine: 'v1',
    changeStreams: 'off',
    pollIntervalMs: 10,
    maxPollIntervalMs: 10,
  },
  'ours-poll-100ms': {
    engine: 'v1',
    changeStreams: 'off',
    pollIntervalMs: 100,
    maxPollIntervalMs: 100,
  },
  // Whether the shortcut between callers of one process pays (issue: ≥ 1.5× in some shape).
  'ours-local-off': { engine: 'v1', changeStreams: 'auto', streamIdleMs: 300, localHandOff: false },
  // Engine v2; its change stream stays open. Callers of one process queued behind its entry
  // take it over without a write, or (local-off) each caller joins the line itself.
  'ours-v2': { engine: 'v2' },
  'ours-v2-local-off': { engine: 'v2', localHandOff: false },
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
