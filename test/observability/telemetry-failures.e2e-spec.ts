// Telemetry never changes a lock call's outcome: a span processor or a meter that throws (an
// SDK's bug, a broken exporter) is ignored. Above all, a lock granted is handed over: were the
// telemetry's error thrown after the grant, the lock would stay held with no handle to free it.
import { metrics, trace } from '@opentelemetry/api';
import { BasicTracerProvider, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { LockTestKit, sleep } from '../lock-service/lock-test-kit';

jest.setTimeout(60_000);

let spanEndThrows = false;
let spanStartThrows = false;
let counterThrows = false;

/** A span processor with a bug in onEnd (the SDK's MultiSpanProcessor does not catch it). */
const throwingProcessor: SpanProcessor = {
  onStart: () => {
    if (spanStartThrows) throw new Error('span processor broke at the start');
  },
  onEnd: () => {
    if (spanEndThrows) throw new Error('span processor broke');
  },
  forceFlush: async () => undefined,
  shutdown: async () => undefined,
};
const tracerProvider = new BasicTracerProvider({ spanProcessors: [throwingProcessor] });

const instrument = {
  add: () => {
    if (counterThrows) throw new Error('meter broke');
  },
  record: () => undefined,
};
const brokenMeter = {
  createCounter: () => instrument,
  createHistogram: () => instrument,
  createUpDownCounter: () => instrument,
  createGauge: () => instrument,
  createObservableUpDownCounter: () => ({ addCallback: () => undefined }),
  createObservableGauge: () => ({ addCallback: () => undefined }),
  createObservableCounter: () => ({ addCallback: () => undefined }),
  addBatchObservableCallback: () => undefined,
  removeBatchObservableCallback: () => undefined,
};

describe('telemetry that throws', () => {
  const kit = LockTestKit.forSuite();
  beforeAll(() => {
    expect(trace.setGlobalTracerProvider(tracerProvider)).toBe(true);
    expect(metrics.setGlobalMeterProvider({ getMeter: () => brokenMeter as never })).toBe(true);
  });
  afterEach(() => {
    spanEndThrows = false;
    spanStartThrows = false;
    counterThrows = false;
  });
  afterAll(async () => {
    await tracerProvider.shutdown();
    trace.disable();
    metrics.disable();
  });

  describe('changes no lock call', () => {
    it('withLock runs its work and releases, though the span processor throws in onEnd', async () => {
      const locks = await kit.service();
      const other = await kit.service();
      spanEndThrows = true;
      let ran = false;
      const outcome = await locks
        .withLock('leaky', () => void (ran = true), { ttlMs: 1_000 })
        .then(
          () => 'ok',
          (error: Error) => error.message,
        );
      spanEndThrows = false;
      // Over two leases: a lock leaked by the failure would be renewed, never released.
      await sleep(2_500);
      const again = await other.tryAcquire('leaky');
      await again?.release();
      expect({
        outcome,
        ran,
        otherGotIt: again !== null,
        stillHeld: locks.diagnostics.held,
      }).toEqual({ outcome: 'ok', ran: true, otherGotIt: true, stillHeld: 0 });
    });

    it('acquire hands over the handle, though the counter throws', async () => {
      const locks = await kit.service();
      counterThrows = true;
      const outcome = await locks.acquire('leaky-meter', { ttlMs: 60_000 }).then(
        (handle) => handle.release().then(() => 'handle'),
        (error: Error) => error.message,
      );
      counterThrows = false;
      const state = await locks.inspect('leaky-meter');
      expect({ outcome, held: state?.held, diagnosticsHeld: locks.diagnostics.held }).toEqual({
        outcome: 'handle',
        held: false,
        diagnosticsHeld: 0,
      });
    });

    it('tryAcquire on a busy key resolves to null, though the span processor throws', async () => {
      const locks = await kit.service();
      const holder = await locks.acquire('busy');
      spanEndThrows = true;
      const outcome = await locks.tryAcquire('busy').then(
        (h) => (h === null ? 'null' : 'handle'),
        (error: Error) => error.message,
      );
      spanEndThrows = false;
      await holder.release();
      expect(outcome).toBe('null');
    });

    it("a @Locked method's result is its own, though the span processor throws", async () => {
      const locks = await kit.service();
      spanEndThrows = true;
      let ran = 0;
      const outcome = await locks.telemetry
        .lockedMethod('orders:{id}', 'Orders.ship', async () => {
          ran += 1;
          return 'shipped';
        })
        .catch((error: Error) => error.message);
      spanEndThrows = false;
      expect({ outcome, ran }).toEqual({ outcome: 'shipped', ran: 1 });
    });

    it('runs untraced when the tracer fails to start a span', async () => {
      const locks = await kit.service();
      const holder = await locks.acquire('unstarted:busy');
      spanStartThrows = true;
      await expect(locks.withLock('unstarted', () => 'ran')).resolves.toBe('ran');
      await expect(locks.tryAcquire('unstarted:busy')).resolves.toBeNull();
      await expect(
        locks.telemetry.lockedMethod('orders:{id}', 'Orders.ship', async () => 'shipped'),
      ).resolves.toBe('shipped');
      spanStartThrows = false;
      await holder.release();
      expect((await locks.inspect('unstarted'))?.held).toBe(false);
    });
  });
});
