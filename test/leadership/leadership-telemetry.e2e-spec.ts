import { metrics } from '@opentelemetry/api';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
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

  it('leading (health: leader/follower; gauge) lists only the names this instance stands for', async () => {
    const a = await kit.service({ holderId: 'A' });
    // Only watching who leads, as a status page would: this instance does not stand.
    const sub = a.leadership('watch-only').leader$.subscribe();
    expect([...a.leading.keys()]).not.toContain('watch-only');
    sub.unsubscribe();
  });
});
