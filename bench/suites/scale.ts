import type { ScaleOps, ScaleResult } from '../scale-worker';
import { BenchChild } from '../support/bench-process';

/** 10,000 waiters on 1,000 keys in one process: streams, attempts and memory per waiter. */
export async function measureScale(
  uri: string,
  keys: number,
  waitersPerKey: number,
): Promise<ScaleResult> {
  const worker = new BenchChild<ScaleOps>('bench/scale-worker.ts', 'scale', ['--expose-gc']);
  try {
    return await worker.call('run', {
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
