import type { BenchWorker } from '../support/bench-worker';
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
/** The waiter's random wait before each release, in ms: `idleMs()` gives one draw. */
const idleMs = () => 20 + Math.random() * 100;

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
    await sleep(idleMs());
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

/**
 * One `ping` after each of `count` idle waits drawn as the hand-off's: the reference for a
 * latency that starts on an idle machine. On a VM, a process woken after tens of milliseconds
 * asleep answers several times slower than one kept busy by back-to-back pings, and every
 * hand-off starts that way.
 */
export async function measurePingAfterIdle(worker: BenchWorker, count: number): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    await sleep(idleMs());
    samples.push(...(await worker.call('ping', { count: 1 })).samples);
  }
  return samples;
}

/**
 * The floor of any hand-off that travels by a change stream, on this machine and server: one
 * small majority update by `writer`, from just before it is sent to the moment `watcher`'s
 * change stream delivers its event, after the same idle wait as a hand-off's. No lock, no
 * pipeline, no library: what is left of a hand-off once the locking is taken out.
 */
export async function measureEventFloor(
  writer: BenchWorker,
  watcher: BenchWorker,
  count: number,
): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < count + 1; i++) {
    await watcher.call('watchRelay', {});
    await sleep(idleMs());
    const written = await writer.call('relayWrite', {});
    const heard = await watcher.call('awaitRelay', {});
    // The first one opens the stream: a warm-up.
    if (i > 0) samples.push(heard.at - written.at);
  }
  return samples;
}
