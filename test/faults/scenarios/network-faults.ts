import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import {
  FaultProxy,
  passThrough,
  proxiedUri,
  proxyTarget,
  type ProxyMode,
} from '../../support/fault-proxy';
import type { ContendArgs, ContendStats } from '../../support/fault-protocol';
import { FaultRun } from '../harness/fault-run';
import { readLiveLeases } from '../harness/line-leases';
import type { Violation } from '../history/history';
import { settleWithin } from '../harness/contend-checks';
import { Expectations, sleep, type Scenario } from './scenario';

const processes = 4;
const workersPerProcess = 3;
const keys = ['net:a', 'net:b', 'net:c'];
/** Leases alternate per process, so short and long ones meet on the same keys. */
const ttlOf = (index: number): number => (index % 2 === 0 ? 1000 : 1500);
const longestTtlMs = 1500;
const timeoutMs = 2500;
/** The module option: the longest one lock command may take. */
const operationTimeoutMs = 1000;
/** An acquisition must settle by its `timeoutMs` plus this. */
const settleBoundMs = operationTimeoutMs + 1000;
const faultPhaseMs = 15_000;
/** Contention goes on this long in pass-through after the faults stop. */
const cleanTailMs = 2000;
/** Past the last possible section, a worker still contending counts as stuck. */
const stuckAfterMs = 15_000;
/** Pass-through between two faults on one proxy. */
const gapMs = 300;

interface Fault {
  name: string;
  mode: ProxyMode;
  ms: number;
}

/** Each proxy cycles through these, starting at a different one. Leases are 1000–1500 ms. */
const faults: Fault[] = [
  { name: 'latency', mode: { latency: { baseMs: 80, jitterMs: 250 } }, ms: 2000 },
  { name: 'short black hole', mode: { blackHole: 'release' }, ms: 600 },
  { name: 'resets', mode: { reset: { probability: 0.3 } }, ms: 1500 },
  { name: 'long black hole', mode: { blackHole: 'release' }, ms: 2500 },
  { name: 'drip', mode: { drip: { bytes: 16, delayMs: 15 } }, ms: 2000 },
  { name: 'dropped black hole', mode: { blackHole: 'drop' }, ms: 2000 },
  {
    name: 'latency+drip+resets',
    mode: {
      latency: { baseMs: 40, jitterMs: 120 },
      drip: { bytes: 64, delayMs: 10 },
      reset: { probability: 0.1 },
    },
    ms: 1500,
  },
];

/**
 * Network faults `failCommand` cannot make: 4 processes × 3 workers on 3 keys, each process
 * behind its own TCP proxy, with leases of 1000 and 1500 ms (half renewed), while the proxies
 * cycle through latency with jitter, black holes shorter and longer than a lease (released or
 * dropped at their end), connections reset in the middle of a reply, and replies that drip in.
 * Then pass-through. Besides the checker: every acquisition settles within its timeout plus
 * `operationTimeoutMs` + 1 s, no worker fails, and no lock is left held once all work ended.
 */
export const networkFaults: Scenario = {
  name: 'network faults: 4 processes behind TCP proxies, 3 keys',
  async run(server) {
    const run = new FaultRun(server, 'netfaults');
    const expect = new Expectations();
    const proxies = Array.from(
      { length: processes },
      () => new FaultProxy(proxyTarget(server.uri)),
    );
    try {
      await Promise.all(proxies.map((p) => p.start()));
      const workers = await run.spawn(
        proxies.map((proxy, i) => ({
          label: `net${i}`,
          uri: proxiedUri(server.uri, proxy.port, { appName: `net${i}` }),
          options: { operationTimeoutMs },
        })),
      );
      const startedAt = sharedClockMs();
      const faultsEndAt = startedAt + faultPhaseMs;
      const stopAt = faultsEndAt + cleanTailMs;
      const contention = workers.map((w, i) =>
        settleWithin(w.process.call('contend', contendArgs(i, stopAt)), stopAt + stuckAfterMs),
      );
      const injected = new Map<string, number>();
      await Promise.all(proxies.map((p, i) => cycleFaults(p, i * 2, faultsEndAt, injected)));
      const results = await Promise.all(contention);

      const stats: ContendStats[] = [];
      for (const [i, result] of results.entries()) {
        if ('failure' in result) expect.that(false, '*', `${workers[i].label}: ${result.failure}`);
        else {
          stats.push(result.stats);
          checkWorker(workers[i].label, result.stats, expect);
        }
      }
      const sections = stats.reduce((sum, s) => sum + s.sections, 0);
      if (stats.length === processes) {
        expect.that(
          run.history.sections.length === sections,
          '*',
          `${sections} sections counted, ${run.history.sections.length} reported`,
        );
      }
      // Before describing what is left: a live lease then is a leaked lock (check() reports
      // what endWork found).
      await run.endWork();
      const orphans = await describeLiveLeases(run);
      const violations = await run.check({ leaseMs: longestTtlMs }, expect.violations);
      return {
        operations: run.history.sections.length,
        violations,
        notes: summarize(stats, proxies, injected, violations, orphans),
      };
    } finally {
      await run.stop();
      await Promise.all(proxies.map((p) => p.stop()));
    }
  },
};

function contendArgs(index: number, stopAt: number): ContendArgs {
  const ttlMs = ttlOf(index);
  return {
    keys,
    workers: workersPerProcess,
    ttlMs,
    timeoutMs,
    hold: { shortMaxMs: 40, longShare: 0.05, longMinMs: ttlMs * 1.2, longMaxMs: ttlMs * 1.5 },
    renewShare: 0.5,
    stopAt,
    maxSections: 2000,
  };
}

/** One proxy's fault loop: a fault, a short pass-through, the next fault, until `until`. */
async function cycleFaults(
  proxy: FaultProxy,
  first: number,
  until: number,
  injected: Map<string, number>,
): Promise<void> {
  for (let k = first; sharedClockMs() < until; k++) {
    const fault = faults[k % faults.length];
    proxy.setMode(fault.mode);
    injected.set(fault.name, (injected.get(fault.name) ?? 0) + 1);
    await sleep(Math.max(0, Math.min(fault.ms, until - sharedClockMs())));
    proxy.setMode(passThrough);
    await sleep(gapMs);
  }
  proxy.setMode(passThrough);
}

function checkWorker(label: string, stats: ContendStats, expect: Expectations): void {
  expect.that(
    stats.errors.length === 0,
    '*',
    `${label}: ${stats.errors.length} worker errors: ${stats.errors.join('; ')}`,
  );
  const overshoot = stats.maxSettleOvershootMs ?? 0;
  expect.that(
    overshoot <= settleBoundMs,
    '*',
    `${label}: an acquisition settled ${Math.round(overshoot)} ms after its timeoutMs ` +
      `(${timeoutMs} ms); bound ${settleBoundMs} ms`,
  );
}

/** Live leases in the lock collection, as text: key, holder, fence and lease left. */
async function describeLiveLeases(run: FaultRun): Promise<string[]> {
  const { leases } = await readLiveLeases(run.lines);
  return leases.map(
    (l) => `${l.key} by ${l.holder} (fence ${l.fence}, ${Math.round(l.remainingMs)} ms left)`,
  );
}

function summarize(
  stats: ContendStats[],
  proxies: FaultProxy[],
  injected: Map<string, number>,
  violations: Violation[],
  orphans: string[],
): string {
  const sum = (f: (s: ContendStats) => number) => stats.reduce((n, s) => n + f(s), 0);
  const counters = proxies.map((p) => p.counters);
  const overshoot = Math.max(...stats.map((s) => s.maxSettleOvershootMs ?? 0));
  const kinds = new Map<string, number>();
  for (const v of violations) kinds.set(v.kind, (kinds.get(v.kind) ?? 0) + 1);
  return [
    `${[...injected.values()].reduce((a, b) => a + b, 0)} faults`,
    `${counters.reduce((n, c) => n + c.connections, 0)} connections`,
    `${counters.reduce((n, c) => n + c.resets, 0)} reset mid-reply`,
    `${counters.reduce((n, c) => n + c.dropped, 0)} dropped`,
    `${sum((s) => s.lost)} lost`,
    `${sum((s) => s.timeouts)} timeouts`,
    `${sum((s) => s.unavailable ?? 0)} unavailable`,
    `${sum((s) => s.errors.length)} errors`,
    `max overshoot ${Math.round(overshoot)} ms`,
    `violations: ${kinds.size === 0 ? 'none' : [...kinds].map(([k, n]) => `${n} ${k}`).join(', ')}`,
    ...(orphans.length > 0 ? [`live leases at the end: ${orphans.join('; ')}`] : []),
  ].join('; ');
}
