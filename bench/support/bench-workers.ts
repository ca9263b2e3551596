import * as path from 'node:path';
import { IpcChild } from '../../test/support/fault-ipc';
import type { VariantName } from '../adapters/bench-lock';
import type { BenchOps } from './bench-protocol';

export type BenchWorker = IpcChild<BenchOps>;

const workerEntry = path.resolve(__dirname, '../worker.ts');

/** Starts `count` worker processes of one variant, in parallel, all on one database. */
export async function spawnBenchWorkers(
  variant: VariantName | 'none',
  count: number,
  connection: { uri: string; dbName: string },
): Promise<BenchWorker[]> {
  return Promise.all(
    Array.from({ length: count }, async (_, index) => {
      const worker: BenchWorker = IpcChild.fork(workerEntry, { label: `${variant}#${index}` });
      await worker.call('start', { variant, ...connection });
      return worker;
    }),
  );
}

export async function stopBenchWorkers(workers: BenchWorker[]): Promise<void> {
  await Promise.all(workers.map((worker) => worker.stop('close')));
}
