// src/peers.ts of the app installed with the optional peers: `@opentelemetry/api` (the library
// reports to the providers the app registers) and `@nestjs/terminus` (the
// `nestjs-mongo-lock/health` entry). Its tsc type-checks that entry and the app's own use of
// the real OpenTelemetry types; its run, that both work from the installed tarball.
import { Controller, Get, Module, type INestApplication } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import {
  createNoopMeter,
  metrics,
  ProxyTracerProvider,
  trace,
  type Meter,
  type Tracer,
} from '@opentelemetry/api';
import { MongoLockHealthIndicator } from 'nestjs-mongo-lock/health';

// Providers that record what the library creates, registered when this module loads (before
// the app creates its LockService). No SDK: the rest is the API's no-op.
const spans = new Set<string>();
const instruments = new Set<string>();
const noopTracer = new ProxyTracerProvider().getTracer('compat');
const tracer: Tracer = {
  startSpan: (name, options, context) => noopTracer.startSpan(name, options, context),
  startActiveSpan: ((name: string, ...rest: unknown[]) => {
    spans.add(name);
    return Reflect.apply(noopTracer.startActiveSpan, noopTracer, [name, ...rest]) as unknown;
  }) as Tracer['startActiveSpan'],
};
const noopMeter = createNoopMeter();
const meter: Meter = Object.assign(Object.create(noopMeter) as Meter, {
  createCounter: ((name, options) => {
    instruments.add(name);
    return noopMeter.createCounter(name, options);
  }) satisfies Meter['createCounter'],
  createHistogram: ((name, options) => {
    instruments.add(name);
    return noopMeter.createHistogram(name, options);
  }) satisfies Meter['createHistogram'],
});
trace.setGlobalTracerProvider({ getTracer: () => tracer });
metrics.setGlobalMeterProvider({ getMeter: () => meter });

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly locks: MongoLockHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.locks.isHealthy('locks', { timeoutMs: 5_000 })]);
  }
}

@Module({
  imports: [TerminusModule],
  controllers: [HealthController],
  providers: [MongoLockHealthIndicator],
})
export class PeersModule {}

function expect(condition: boolean, message: string, detail?: unknown): void {
  if (!condition) {
    throw new Error(detail === undefined ? message : `${message}: ${JSON.stringify(detail)}`);
  }
}

/** Runs after the main checks, whose @Locked requests the recording providers saw. */
export async function runPeerChecks(_app: INestApplication, baseUrl: string): Promise<void> {
  const response = await fetch(`${baseUrl}/health`);
  const body = (await response.json()) as { info?: { locks?: Record<string, unknown> } };
  const locks = body.info?.locks;
  expect(response.status === 200 && locks?.status === 'up', 'GET /health', body);
  expect(locks?.store === 'reachable', 'health: store', body);
  console.log(`ok - nestjs-mongo-lock/health with @nestjs/terminus: /health up`);

  const wanted = ['lock.acquire', 'lock.hold'];
  expect(
    wanted.every((name) => spans.has(name)),
    'spans',
    { wanted, seen: [...spans] },
  );
  expect(instruments.has('lock.acquired') && instruments.has('lock.acquire.duration'), 'meter', {
    seen: [...instruments],
  });
  console.log(
    `ok - @opentelemetry/api: the app's providers got spans ${wanted.join(', ')} and ` +
      `${instruments.size} instruments`,
  );
}
