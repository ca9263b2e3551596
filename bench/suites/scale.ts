import * as path from 'node:path';
import { IpcChild } from '../../test/support/fault-ipc';
import type { ScaleOps, ScaleResult } from '../scale-worker';

/** 10,000 waiters on 1,000 keys in one process: streams, attempts and memory per waiter. */
export async function measureScale(
  uri: string,
  keys: number,
  waitersPerKey: number,
): Promise<ScaleResult> {
  const worker = IpcChild.fork<ScaleOps>(path.resolve(__dirname, '../scale-worker.ts'), {
    label: 'scale',
    nodeFlags: ['--expose-gc'],
  });
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
