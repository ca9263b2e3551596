import { BenchWorker } from '../support/bench-worker';
import type { ScaleResult } from '../worker-protocol';

/** 10,000 waiters on 1,000 keys in one process: streams, attempts and memory per waiter. */
export async function measureScale(
  uri: string,
  keys: number,
  waitersPerKey: number,
  engine: 'v1' | 'v2' = 'v1',
): Promise<ScaleResult> {
  const worker = new BenchWorker('scale', ['--expose-gc']);
  try {
    return await worker.call('scale', {
      uri,
      dbName: `bench_scale_${engine}`,
      keys,
      waitersPerKey,
      releases: 100,
      engine,
    });
  } finally {
    await worker.stop();
  }
}
