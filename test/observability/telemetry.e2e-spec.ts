import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { metrics, trace } from '@opentelemetry/api';
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { MongoNetworkError } from 'mongodb';
import { Locked, LockNotAcquiredError, LockService, LockStoreUnavailableError } from '../../lib';
import { LEAVE_PIPELINE } from '../../lib/store/line/line-pipelines';
import { commandOf, interceptedClient } from '../support/intercepted-collection';
import { eventually, LockTestKit, sleep } from '../lock-service/lock-test-kit';
import { lockModule, startAppContext } from '../nest/support/nest-apps';

jest.setTimeout(60_000);

const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const metricReader = new PeriodicExportingMetricReader({
  exporter: metricExporter,
  exportIntervalMillis: 60_000,
});
const spanExporter = new InMemorySpanExporter();
const meterProvider = new MeterProvider({ readers: [metricReader] });
const tracerProvider = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(spanExporter)],
});

/** The instruments as last exported, by name. */
async function readMetrics(): Promise<Map<string, MetricData>> {
  metricExporter.reset();
  await metricReader.forceFlush();
  const byName = new Map<string, MetricData>();
  for (const resource of metricExporter.getMetrics()) {
    for (const scope of resource.scopeMetrics) {
      if (scope.scope.name !== 'nestjs-mongo-lock') continue;
      for (const metric of scope.metrics) byName.set(metric.descriptor.name, metric);
    }
  }
  return byName;
}

/** A counter's or gauge's value for one template (summed over other attributes). */
function sumFor(data: MetricData | undefined, template?: string): number {
  if (!data) return 0;
  let total = 0;
  for (const point of data.dataPoints) {
    if (template !== undefined && point.attributes['lock.template'] !== template) continue;
    const value = point.value as number | { count: number };
    total += typeof value === 'number' ? value : value.count;
  }
  return total;
}

function allAttributeValues(byName: Map<string, MetricData>): unknown[] {
  const values: unknown[] = [];
  for (const data of byName.values()) {
    for (const point of data.dataPoints) values.push(...Object.values(point.attributes));
  }
  for (const span of spanExporter.getFinishedSpans())
    values.push(...Object.values(span.attributes));
  return values;
}

@Injectable()
class Orders {
  @Locked('orders:{args.0}', { timeoutMs: 0 })
  async ship(id: string, work?: Promise<void>): Promise<string> {
    await work;
    return `shipped ${id}`;
  }

  @Locked(['stock:{args.0}', 'orders:{args.0}'], { timeoutMs: 0 })
  async fail(_id: string): Promise<never> {
    throw new RangeError('no stock');
  }
}

describe('OpenTelemetry metrics and spans', () => {
  const kit = LockTestKit.forSuite();
  let app: INestApplicationContext | undefined;

  beforeAll(() => {
    // Before any LockService exists: a service reports to the meter provider it was created under.
    expect(metrics.setGlobalMeterProvider(meterProvider)).toBe(true);
    expect(trace.setGlobalTracerProvider(tracerProvider)).toBe(true);
  });

  afterEach(async () => {
    await app?.close();
    app = undefined;
    spanExporter.reset();
  });

  afterAll(async () => {
    await meterProvider.shutdown();
    await tracerProvider.shutdown();
    metrics.disable();
    trace.disable();
  });

  it('counts acquisitions, releases, timeouts and lost leases, by template', async () => {
    const before = await readMetrics();
    const locks = await kit.service();
    const other = await kit.service();

    const held = await locks.acquire('invoices:2024-06', { metricsLabel: 'invoices:{month}' });
    // A wait whose join is answered after its deadline fails as unavailable, not as a timeout:
    // `other`'s pool connection is opened first (a read counts in no instrument), and the wait
    // is long enough for its join's reply on a loaded machine (`held` stays until released).
    await other.inspect('invoices:2024-06');
    await expect(
      other.acquire('invoices:2024-06', { timeoutMs: 1_000, metricsLabel: 'invoices:{month}' }),
    ).rejects.toBeInstanceOf(LockNotAcquiredError);
    await held.release();

    const lost = await other.acquire('reports:daily', { ttlMs: 1_000, renew: false });
    await eventually(() => lost.lost, 5_000);

    const after = await readMetrics();
    const delta = (name: string, template?: string) =>
      sumFor(after.get(name), template) - sumFor(before.get(name), template);
    expect(delta('lock.acquired', 'invoices:{month}')).toBe(1);
    expect(delta('lock.released', 'invoices:{month}')).toBe(1);
    expect(delta('lock.timeouts', 'invoices:{month}')).toBe(1);
    expect(delta('lock.acquired', '(direct)')).toBe(1);
    expect(delta('lock.lost', '(direct)')).toBe(1);
    expect(delta('lock.unavailable')).toBe(0);
    // One wait-time point per acquisition call, and one hold-time point per ended handle.
    expect(delta('lock.acquire.duration')).toBe(3);
    expect(delta('lock.hold.duration')).toBe(2);
    const waits = after.get('lock.acquire.duration')!;
    expect(waits.dataPointType).toBe(DataPointType.HISTOGRAM);
    expect(waits.descriptor.unit).toBe('ms');
    expect(waits.dataPoints.map((point) => point.attributes['lock.outcome']).sort()).toEqual(
      expect.arrayContaining(['acquired', 'timeout']),
    );

    const values = allAttributeValues(after);
    expect(values).not.toContain('invoices:2024-06');
    expect(values).not.toContain('reports:daily');

    const spans = spanExporter.getFinishedSpans().filter((span) => span.name === 'lock.acquire');
    expect(spans.map((span) => span.attributes['lock.outcome'])).toEqual([
      'acquired',
      'timeout',
      'acquired',
    ]);
    expect(spans[0].attributes).toMatchObject({
      'lock.template': 'invoices:{month}',
      'lock.key_count': 1,
    });
  });

  it('counts a release MongoDB did not confirm by its final outcome: lost once its lease ran out', async () => {
    const before = await readMetrics();
    // Every leave is lost on the way: the release, and its give-back in the background.
    const client = interceptedClient(await kit.client(), (target, args) =>
      commandOf(args).pipeline === LEAVE_PIPELINE
        ? Promise.reject(new MongoNetworkError('the leave never reached MongoDB'))
        : target.findOneAndUpdate(...args),
    );
    const locks = await kit.service({ client });
    const held = await locks.acquire('unconfirmed', {
      ttlMs: 1_000,
      renew: false,
      metricsLabel: 'unconfirmed',
    });
    await expect(held.release()).rejects.toBeInstanceOf(LockStoreUnavailableError);
    await eventually(() => held.lost, 5_000);

    const after = await readMetrics();
    const delta = (name: string) =>
      sumFor(after.get(name), 'unconfirmed') - sumFor(before.get(name), 'unconfirmed');
    expect({ released: delta('lock.released'), lost: delta('lock.lost') }).toEqual({
      released: 0,
      lost: 1,
    });
  });

  it('reports callers waiting and locks held on the gauges, for keys and documents', async () => {
    const locks = await kit.service();
    const other = await kit.service();
    const held = await locks.acquire('queue:1');
    const waiting = other.acquire('queue:1', { timeoutMs: 10_000 });
    const queues = (await kit.client()).db(kit.mongo.dbName).collection<{ _id: string }>('queues');
    await queues.insertOne({ _id: 'q' });
    const heldDocument = await locks.documents('queues').acquire('q');
    const waitingDocument = other.documents('queues').acquire('q', { timeoutMs: 10_000 });
    await eventually(() => other.diagnostics.waiters === 2);

    let gauges = await readMetrics();
    expect(sumFor(gauges.get('lock.waiters'))).toBe(2);
    expect(sumFor(gauges.get('lock.held'))).toBe(2);

    await held.release();
    await (await waiting).release();
    await heldDocument.release();
    await (await waitingDocument).release();
    gauges = await readMetrics();
    expect(sumFor(gauges.get('lock.waiters'))).toBe(0);
    expect(sumFor(gauges.get('lock.held'))).toBe(0);
  });

  it('reports leadership per name: the lock.leader gauge and the lock.leader.terms counter', async () => {
    const a = await kit.service();
    const b = await kit.service();
    const leaderOf = (data: MetricData | undefined, name: string) =>
      data?.dataPoints.find((point) => point.attributes['lock.leadership'] === name)?.value;
    const term = await a.leadership('metrics-leader').campaign();
    const next = b.leadership('metrics-leader').campaign();
    let gauges = await readMetrics();
    // One service leads, the other stands: the process leads the name.
    expect(leaderOf(gauges.get('lock.leader'), 'metrics-leader')).toBe(1);
    expect(leaderOf(gauges.get('lock.leader.terms'), 'metrics-leader')).toBe(1);
    // The standing service may win as soon as the first resigns: the gauge is read once it has.
    await term.resign();
    const second = await next;
    gauges = await readMetrics();
    expect(leaderOf(gauges.get('lock.leader'), 'metrics-leader')).toBe(1);
    expect(leaderOf(gauges.get('lock.leader.terms'), 'metrics-leader')).toBe(2);
    // Nobody stands any more: the process leads the name no longer.
    await second.resign();
    gauges = await readMetrics();
    expect(leaderOf(gauges.get('lock.leader'), 'metrics-leader')).toBe(0);
  });

  it('labels @Locked with its templates as written and traces the method', async () => {
    const before = await readMetrics();
    app = await startAppContext({
      imports: [lockModule(kit.mongo, { ...kit.options() })],
      providers: [Orders],
    });
    const orders = app.get(Orders);
    let finish!: () => void;
    const shipping = orders.ship('A-17', new Promise<void>((resolve) => (finish = resolve)));
    await eventually(() => app!.get(LockService).diagnostics.held === 1);
    await expect(orders.ship('A-17')).rejects.toBeInstanceOf(LockNotAcquiredError);
    finish();
    await expect(shipping).resolves.toBe('shipped A-17');
    await expect(orders.fail('B-2')).rejects.toBeInstanceOf(RangeError);
    await sleep(10);

    const after = await readMetrics();
    const delta = (name: string, template: string) =>
      sumFor(after.get(name), template) - sumFor(before.get(name), template);
    expect(delta('lock.acquired', 'orders:{args.0}')).toBe(1);
    expect(delta('lock.released', 'orders:{args.0}')).toBe(1);
    expect(delta('lock.timeouts', 'orders:{args.0}')).toBe(1);
    expect(delta('lock.acquired', 'stock:{args.0},orders:{args.0}')).toBe(1);

    const spans = spanExporter.getFinishedSpans();
    const holds = spans.filter((span) => span.name === 'lock.hold');
    expect(holds.map((span) => span.attributes)).toEqual([
      { 'lock.template': 'orders:{args.0}', 'lock.method': 'Orders.ship', 'lock.outcome': 'ok' },
      {
        'lock.template': 'stock:{args.0},orders:{args.0}',
        'lock.method': 'Orders.fail',
        'lock.outcome': 'error',
        'error.type': 'RangeError',
      },
    ]);
    expect(holds[1].status.code).toBe(2); // SpanStatusCode.ERROR
    expect(spans.filter((span) => span.name === 'lock.acquire')).toHaveLength(3);

    const values = allAttributeValues(after);
    for (const key of ['orders:A-17', 'orders:B-2', 'stock:B-2']) {
      expect(values).not.toContain(key);
      expect(JSON.stringify(values)).not.toContain(key);
    }
  });
});
