import { metrics } from '@opentelemetry/api';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import { leaderKey } from '../../lib/leadership/leader-key';
import type { LeaderTerm } from '../../lib/leadership/leader-term';
import { eventually, LockTestKit } from '../lock-service/lock-test-kit';

jest.setTimeout(30_000);

const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 });
const provider = new MeterProvider({ readers: [reader] });

async function read(): Promise<Map<string, MetricData>> {
  exporter.reset();
  await reader.forceFlush();
  const byName = new Map<string, MetricData>();
  for (const resource of exporter.getMetrics())
    for (const scope of resource.scopeMetrics)
      if (scope.scope.name === 'nestjs-mongo-lock')
        for (const metric of scope.metrics) byName.set(metric.descriptor.name, metric);
  return byName;
}

/** The `lock.waiters` gauge: every service of the meter, summed. */
const lockWaiters = (byName: Map<string, MetricData>) =>
  byName.get('lock.waiters')?.dataPoints[0]?.value;

const point = (data: MetricData | undefined, name: string) =>
  data?.dataPoints.find((p) => p.attributes['lock.leadership'] === name);

describe('leadership: leadership telemetry and health details', () => {
  const kit = LockTestKit.forSuite();
  beforeAll(() => expect(metrics.setGlobalMeterProvider(provider)).toBe(true));
  afterAll(async () => {
    await provider.shutdown();
    metrics.disable();
  });

  it('gauge and counter carry only lock.leadership, and follow terms won, lost and resigned', async () => {
    const a = await kit.service({ holderId: 'A' });
    const terms: LeaderTerm[] = [];
    const sub = a.leadership('otel', { ttlMs: 2_000 }).terms$.subscribe((t) => terms.push(t));
    await eventually(() => terms.length === 1);
    let m = await read();
    expect(point(m.get('lock.leader'), 'otel')?.attributes).toEqual({ 'lock.leadership': 'otel' });
    expect(point(m.get('lock.leader'), 'otel')?.value).toBe(1);
    expect(point(m.get('lock.leader.terms'), 'otel')?.value).toBe(1);
    await a.releaseAllHeld(); // lost; terms$ campaigns again
    await eventually(() => terms.length === 2);
    m = await read();
    expect(point(m.get('lock.leader.terms'), 'otel')?.value).toBe(2);
    sub.unsubscribe();
    await eventually(() => !a.leadership('otel').isLeader);
    m = await read();
    expect(point(m.get('lock.leader'), 'otel')?.value).toBe(0);
  });

  it('a follower in line is no waiter: diagnostics and lock.waiters count callers waiting for locks', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const term = await a.leadership('counted', { ttlMs: 10_000 }).campaign();
    const held = await a.acquire('counted:busy');
    const gaveUp = new AbortController();
    const standing = b
      .leadership('counted', { ttlMs: 10_000 })
      .campaign(gaveUp)
      .catch(() => null);
    const waiting = b.acquire('counted:busy', { timeoutMs: 20_000 });
    // Both in line on MongoDB: the follower for the leader's key, the caller for the busy key.
    await eventually(async () => (await a.inspect(leaderKey('counted')))?.waiting === 1);
    await eventually(async () => (await a.inspect('counted:busy'))?.waiting === 1);

    const counted = { diagnostics: b.diagnostics.waiters, gauge: lockWaiters(await read()) };
    const role = b.leading.get('counted');

    gaveUp.abort();
    await standing;
    await held.release();
    await (await waiting).release();
    await term.resign();
    // The follower is reported under leadership; only the caller waiting for a lock is a waiter.
    expect(role).toBe(false);
    expect(counted).toEqual({ diagnostics: 1, gauge: 1 });
  });

  it('leading (health: leader/follower; gauge) lists only the names this instance stands for', async () => {
    const a = await kit.service({ holderId: 'A' });
    // Only watching who leads, as a status page would: this instance does not stand.
    const sub = a.leadership('watch-only').leader$.subscribe();
    expect([...a.leading.keys()]).not.toContain('watch-only');
    sub.unsubscribe();
  });
});
