import type { BenchWorker } from '../support/bench-workers';
import { sleep } from '../support/stats';

export interface HandoffOptions {
  samples: number;
  /** Iterations run first and thrown away (connections, streams and JIT warming up). */
  warmup: number;
}

/**
 * Hand-off latency between processes: `holder` holds a key while `waiter` waits for it, then
 * releases; the latency is from just before the release was sent (holder's clock) to the
 * moment the waiter's acquire resolved (waiter's clock, same shared clock). The waiter waits
 * a random 20–120 ms first, so pollers are caught at a random point of their interval.
 */
export async function measureHandoff(
  holder: BenchWorker,
  waiter: BenchWorker,
  options: HandoffOptions,
): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < options.warmup + options.samples; i++) {
    const key = 'handoff';
    await holder.call('hold', { key, timeoutMs: 10_000 });
    await waiter.call('startWaiting', { key, timeoutMs: 10_000 });
    await sleep(20 + Math.random() * 100);
    const released = await holder.call('release', { key });
    const acquired = await waiter.call('awaitAcquired', { key });
    await waiter.call('release', { key });
    if (i >= options.warmup) latencies.push(acquired.at - released.at);
  }
  return latencies;
}

/** One `ping` round trip, from the same processes, for expressing latencies as ratios. */
export async function measurePing(worker: BenchWorker, count: number): Promise<number[]> {
  await worker.call('ping', { count: 20 });
  return (await worker.call('ping', { count })).samples;
}
