import type {
  OpenTelemetryApi,
  OtelAttributes as Attributes,
  OtelMeter as Meter,
  OtelSpan as Span,
  OtelTracer as Tracer,
} from './opentelemetry-api';
import { LockNotAcquiredError } from '../errors/lock-not-acquired.error';
import { LockStoreUnavailableError } from '../errors/lock-store-unavailable.error';
import type { HoldSubject, LockLoad, LockTelemetry } from './lock-telemetry';

/** Meter and tracer name. */
const TELEMETRY_SCOPE = 'nestjs-mongo-lock';

/** Attribute names, the same on metrics and spans. */
const ATTR_TEMPLATE = 'lock.template';
const ATTR_OUTCOME = 'lock.outcome';
const ATTR_KEY_COUNT = 'lock.key_count';
const ATTR_METHOD = 'lock.method';
const ATTR_ERROR_TYPE = 'error.type';
const ATTR_LEADERSHIP = 'lock.leadership';

/**
 * How an acquisition ended: `timeout` is `LockNotAcquiredError` (busy, whatever the wait),
 * `unavailable` is `LockStoreUnavailableError`, `error` anything else (aborted, closed).
 */
type AcquireOutcome = 'acquired' | 'timeout' | 'unavailable' | 'error';

function acquireOutcomeOf(error: unknown): Exclude<AcquireOutcome, 'acquired'> {
  if (error instanceof LockNotAcquiredError) return 'timeout';
  if (error instanceof LockStoreUnavailableError) return 'unavailable';
  return 'error';
}

/** The instruments of one meter, shared by every service that reports to it. */
function createInstruments(meter: Meter) {
  /** The services whose load the gauges sum. */
  const loads = new Set<() => LockLoad>();
  const leadershipsSeen = new Set<string>();
  const counter = (name: string, description: string, unit = '{lock}') =>
    meter.createCounter(name, { description, unit });
  const histogram = (name: string, description: string) =>
    meter.createHistogram(name, { description, unit: 'ms' });
  const instruments = {
    waitTime: histogram(
      'lock.acquire.duration',
      'Time from an acquisition call to its outcome (waiting included)',
    ),
    holdTime: histogram('lock.hold.duration', 'Time from acquisition to release or loss'),
    acquired: counter('lock.acquired', 'Acquisitions that returned a handle'),
    released: counter('lock.released', 'Handles that ended released (or left to expire)'),
    lost: counter('lock.lost', 'Handles whose lease was lost or revoked'),
    // Acquisitions that failed, by outcome.
    timeout: counter('lock.timeouts', 'Acquisitions that failed with LockNotAcquiredError'),
    unavailable: counter(
      'lock.unavailable',
      'Acquisitions that failed with LockStoreUnavailableError',
    ),
    terms: counter('lock.leader.terms', 'Leader terms won by this process', '{term}'),
    loads,
  };
  // One callback per meter that sums every service: two services must add up, not overwrite.
  const sum = (name: string, field: 'waiters' | 'held', description: string, unit: string) =>
    meter.createObservableUpDownCounter(name, { description, unit }).addCallback((result) => {
      let total = 0;
      for (const read of loads) total += read()[field];
      result.observe(total);
    });
  sum('lock.waiters', 'waiters', 'Callers waiting for a lock in this process', '{caller}');
  sum('lock.held', 'held', 'Handles holding locks in this process', '{lock}');
  meter
    .createObservableGauge('lock.leader', {
      description: 'Whether this process leads (1) or not (0), per leadership name',
      unit: '{leader}',
    })
    .addCallback((result) => {
      // A name no service stands for any more reads 0, not its last value.
      const leading = new Map<string, boolean>([...leadershipsSeen].map((name) => [name, false]));
      for (const read of loads) {
        for (const [name, leads] of read().leading) {
          leadershipsSeen.add(name);
          leading.set(name, leading.get(name) || leads);
        }
      }
      for (const [name, leads] of leading)
        result.observe(leads ? 1 : 0, { [ATTR_LEADERSHIP]: name });
    });
  return instruments;
}

type LockInstruments = ReturnType<typeof createInstruments>;

const instrumentsByMeter = new WeakMap<Meter, LockInstruments>();

/** Telemetry never changes a lock call's outcome: a meter or tracer that throws is ignored. */
function quietly(report: () => void): void {
  try {
    report();
  } catch {
    // The SDK's own failure (an exporter, a span processor): not the lock's.
  }
}

function instrumentsOf(meter: Meter): LockInstruments {
  let instruments = instrumentsByMeter.get(meter);
  if (!instruments) instrumentsByMeter.set(meter, (instruments = createInstruments(meter)));
  return instruments;
}

/**
 * {@link LockTelemetry} on `@opentelemetry/api`: reports to the global meter and tracer
 * providers, as they are when the service is created (metrics) or used (traces).
 */
export class OpenTelemetryLockTelemetry implements LockTelemetry {
  private readonly instruments: LockInstruments;
  private readonly tracer: Tracer;

  constructor(private readonly api: OpenTelemetryApi) {
    this.instruments = instrumentsOf(api.metrics.getMeter(TELEMETRY_SCOPE));
    this.tracer = api.trace.getTracer(TELEMETRY_SCOPE);
  }

  acquisition<H extends HoldSubject>(
    label: string,
    keyCount: number,
    startedAt: number,
    acquire: () => Promise<H>,
  ): Promise<H> {
    const attributes: Attributes = { [ATTR_TEMPLATE]: label };
    const spanAttributes = { ...attributes, [ATTR_KEY_COUNT]: keyCount };
    // Not an async function: a suspended one keeps its frame per waiter (heap, BENCHMARKS.md).
    return this.inSpan('lock.acquire', spanAttributes, (span) => {
      const settle = (outcome: AcquireOutcome) => {
        const waitedMs = performance.now() - startedAt;
        quietly(() =>
          this.instruments.waitTime.record(waitedMs, { ...attributes, [ATTR_OUTCOME]: outcome }),
        );
        quietly(() => span?.setAttribute(ATTR_OUTCOME, outcome));
        quietly(() => span?.end());
      };
      return acquire().then(
        (handle) => {
          // A lock granted is handed over whatever the telemetry does: else it would leak.
          quietly(() => this.instruments.acquired.add(1, attributes));
          quietly(() => this.watchHold(handle, attributes));
          settle('acquired');
          return handle;
        },
        (error: unknown) => {
          const outcome = acquireOutcomeOf(error);
          if (outcome !== 'error') quietly(() => this.instruments[outcome].add(1, attributes));
          // A busy lock is an answer, not a failure: only the others mark the span failed.
          if (outcome !== 'timeout') quietly(() => this.fail(span, error));
          settle(outcome);
          throw error;
        },
      );
    });
  }

  lockedMethod<T>(label: string, where: string, run: () => Promise<T>): Promise<T> {
    const attributes = { [ATTR_TEMPLATE]: label, [ATTR_METHOD]: where };
    return this.inSpan('lock.hold', attributes, async (span) => {
      try {
        const result = await run();
        quietly(() => span?.setAttribute(ATTR_OUTCOME, 'ok'));
        return result;
      } catch (error) {
        quietly(() => span?.setAttribute(ATTR_OUTCOME, 'error'));
        quietly(() => this.fail(span, error));
        throw error;
      } finally {
        quietly(() => span?.end());
      }
    });
  }

  observeLoad(read: () => LockLoad): () => void {
    const { loads } = this.instruments;
    loads.add(read);
    return () => void loads.delete(read);
  }

  termBegan(name: string): void {
    quietly(() => this.instruments.terms.add(1, { [ATTR_LEADERSHIP]: name }));
  }

  private watchHold(handle: HoldSubject, attributes: Attributes): void {
    const acquiredAt = performance.now();
    // Reported from lost$'s completion: a throw there would be rxjs's unhandled error.
    const ended = () =>
      quietly(() => {
        const outcome = handle.lost ? 'lost' : 'released';
        this.instruments[outcome].add(1, attributes);
        this.instruments.holdTime.record(performance.now() - acquiredAt, {
          ...attributes,
          [ATTR_OUTCOME]: outcome,
        });
      });
    handle.lost$.subscribe({ complete: ended, error: ended });
  }

  /** `run` under a new active span; without one if the tracer fails before it runs. */
  private inSpan<T>(name: string, attributes: Attributes, run: (span?: Span) => T): T {
    let entered = false;
    try {
      return this.tracer.startActiveSpan(name, { attributes }, (span) => {
        entered = true;
        return run(span);
      });
    } catch (error) {
      if (entered) throw error;
      return run();
    }
  }

  private fail(span: Span | undefined, error: unknown): void {
    if (!span) return;
    // The class name, never the message nor recordException: messages quote keys, and keys must
    // stay out of telemetry.
    const type = error instanceof Error ? error.name : typeof error;
    span.setAttribute(ATTR_ERROR_TYPE, type);
    span.setStatus({ code: this.api.SpanStatusCode.ERROR, message: type });
  }
}
