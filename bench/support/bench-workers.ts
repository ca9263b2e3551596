import * as path from 'node:path';
import { IpcChild } from '../../test/support/fault-ipc';
import type { VariantName } from '../adapters/bench-lock';
import type { BenchOps } from './bench-protocol';

export type BenchWorker = IpcChild<BenchOps>;

const workerEntry = path.resolve(__dirname, '../worker.ts');

/**
 * Starts `count` worker processes in parallel, each with every variant ready: processes are
 * started once per run, and the variants then take turns on the same processes.
 */
export async function spawnBenchWorkers(
  variants: VariantName[],
  count: number,
  connection: { uri: string; dbName: string },
): Promise<BenchWorker[]> {
  return Promise.all(
    Array.from({ length: count }, async (_, index) => {
      const worker: BenchWorker = IpcChild.fork(workerEntry, { label: `bench#${index}` });
      await worker.call('start', { variants, ...connection });
      return worker;
    }),
  );
}

export async function useVariant(workers: BenchWorker[], variant: VariantName): Promise<void> {
  await Promise.all(workers.map((worker) => worker.call('use', { variant })));
}

export async function stopBenchWorkers(workers: BenchWorker[]): Promise<void> {
  await Promise.all(workers.map((worker) => worker.stop('close')));
}
