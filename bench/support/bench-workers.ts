import type { VariantName } from '../adapters/bench-lock';
import type { BenchOps } from './bench-protocol';
import { BenchChild } from './bench-process';

export type BenchWorker = BenchChild<BenchOps>;

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
      const worker: BenchWorker = new BenchChild<BenchOps>('bench/worker.ts', `bench#${index}`);
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
