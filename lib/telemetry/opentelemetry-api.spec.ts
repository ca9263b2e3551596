import * as api from '@opentelemetry/api';
import type { ObservableResult, Span } from '@opentelemetry/api';
import type {
  OpenTelemetryApi,
  OtelMeter,
  OtelObservableResult,
  OtelSpan,
  OtelTracer,
} from './opentelemetry-api';

// The published declarations describe `@opentelemetry/api` structurally (an app without it must
// still type-check them). These compile (`npm run typecheck`) only while the real module fits
// those shapes. What the real tracer and meter hand to the library's callbacks is checked on its
// own: callback parameters are compared loosely when a whole tracer or meter is assigned.
const real: OpenTelemetryApi = api;
const meter: OtelMeter = api.metrics.getMeter('x');
const tracer: OtelTracer = api.trace.getTracer('x');
const spanFits = (span: Span): OtelSpan => span;
const resultFits = (result: ObservableResult): OtelObservableResult => result;

describe('the structural OpenTelemetry types', () => {
  it('accept the real @opentelemetry/api, its meter, tracer, spans and results', () => {
    expect(real.SpanStatusCode.ERROR).toBe(api.SpanStatusCode.ERROR);
    expect(typeof meter.createObservableUpDownCounter).toBe('function');
    const done = tracer.startActiveSpan('x', { attributes: { a: 1 } }, (span) => {
      spanFits(span as Span).end();
      return 'done';
    });
    expect(done).toBe('done');
    expect(typeof resultFits).toBe('function');
  });
});
