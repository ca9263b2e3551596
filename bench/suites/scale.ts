import { BenchWorker } from '../support/bench-worker';
import type { ScaleResult } from '../worker-protocol';

/** 10,000 waiters on 1,000 keys in one process: streams, attempts and memory per waiter. */
export async function measureScale(
  uri: string,
  keys: number,
  waitersPerKey: number,
): Promise<ScaleResult> {
  const worker = new BenchWorker('scale', ['--expose-gc']);
  try {
    return await worker.call('scale', {
      uri,
      dbName: 'bench_scale',
      keys,
      waitersPerKey,
      releases: 100,
    });
  } finally {
    await worker.stop();
  }
}
