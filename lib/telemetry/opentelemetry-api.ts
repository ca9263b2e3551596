// The parts of `@opentelemetry/api` the library uses, as structural types: published
// declarations must not import an optional peer (TS2307 for apps without it and with
// `skipLibCheck: false`). opentelemetry-api.spec.ts checks them against the real module.

/** Attribute values the library sets: strings and numbers, never a key. @internal */
export type OtelAttributes = Record<string, string | number>;

/** `MetricOptions`, as far as the library sets them. @internal */
type OtelMetricOptions = { description?: string; unit?: string };

/** `ObservableResult`. @internal */
export interface OtelObservableResult {
  observe(value: number, attributes?: OtelAttributes): void;
}

/** `Meter`, and of the instruments it makes what the library calls. @internal */
export interface OtelMeter {
  createCounter(
    name: string,
    options?: OtelMetricOptions,
  ): { add(value: number, attributes?: OtelAttributes): void };
  createHistogram(
    name: string,
    options?: OtelMetricOptions,
  ): { record(value: number, attributes?: OtelAttributes): void };
  createObservableUpDownCounter(name: string, options?: OtelMetricOptions): OtelObservable;
  createObservableGauge(name: string, options?: OtelMetricOptions): OtelObservable;
}

/** `ObservableUpDownCounter` and `ObservableGauge`. @internal */
type OtelObservable = { addCallback(callback: (result: OtelObservableResult) => void): void };

/** `Span`. @internal */
export interface OtelSpan {
  setAttribute(key: string, value: string | number): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  end(): void;
}

/** `Tracer`. @internal */
export interface OtelTracer {
  startActiveSpan<F extends (span: OtelSpan) => unknown>(
    name: string,
    options: { attributes?: OtelAttributes },
    fn: F,
  ): ReturnType<F>;
}

/** The `@opentelemetry/api` module, as far as the library uses it. @internal */
export interface OpenTelemetryApi {
  metrics: { getMeter(name: string): OtelMeter };
  trace: { getTracer(name: string): OtelTracer };
  SpanStatusCode: { readonly ERROR: number };
}

/** Loads `@opentelemetry/api`; throws as `require` does when it is absent. @internal */
export type OpenTelemetryLoader = () => OpenTelemetryApi;

// Loaded when a LockService is created, never when the entry is imported.
const requireOpenTelemetry: OpenTelemetryLoader = () =>
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  require('@opentelemetry/api') as OpenTelemetryApi;

/** `@opentelemetry/api`, or `undefined` if it is not installed; a broken one throws. @internal */
export function loadOpenTelemetryApi(
  load: OpenTelemetryLoader = requireOpenTelemetry,
): OpenTelemetryApi | undefined {
  try {
    return load();
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    if (code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND') return undefined;
    throw error;
  }
}
