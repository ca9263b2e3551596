// Background work outlives the call that started it: a lease's renewals, the service's start
// and its change stream. It runs outside the caller's async context, so that with an
// OpenTelemetry context manager (NodeSDK's is on AsyncLocalStorage) and the MongoDB
// instrumentation, its commands join no span that ended long before (one trace per hold, or per
// service, that would grow for as long as the lock or the service lasts).
import { AsyncLocalStorage } from 'node:async_hooks';
import {
  context,
  ROOT_CONTEXT,
  trace,
  type Context,
  type ContextManager,
} from '@opentelemetry/api';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import type { Collection, Document, MongoClient } from 'mongodb';
import { LockService } from '../../lib';
import { RENEW_PIPELINE } from '../../lib/store/line/line-pipelines';
import { commandOf } from '../support/intercepted-collection';
import { LockTestKit, sleep } from '../lock-service/lock-test-kit';

jest.setTimeout(30_000);

/** NodeSDK's default is AsyncLocalStorageContextManager; this is the same thing, minimal. */
class AlsContextManager implements ContextManager {
  private readonly als = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.als.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.als.run(ctx, () => fn.call(thisArg, ...args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.als.disable();
    return this;
  }
}

const tracerProvider = new BasicTracerProvider();

describe("background work and the caller's trace", () => {
  const kit = LockTestKit.forSuite();
  beforeAll(() => {
    expect(context.setGlobalContextManager(new AlsContextManager())).toBe(true);
    expect(trace.setGlobalTracerProvider(tracerProvider)).toBe(true);
  });
  afterAll(async () => {
    await tracerProvider.shutdown();
    trace.disable();
    context.disable();
  });

  it('renews and opens its change streams under no span of the acquisition or its caller', async () => {
    const seen: { what: string; span: string | undefined; ended: boolean }[] = [];
    const client = spyingClient(await kit.client(), seen);
    // Not started yet: its first acquisition starts it, under the caller's span.
    const locks = new LockService(kit.options({ client }));
    try {
      const caller = trace.getTracer('test');
      const handle = await caller.startActiveSpan('request', async (span) => {
        try {
          return await locks.acquire('job', { ttlMs: 1_000, renew: true });
        } finally {
          span.end();
        }
      });
      // events$'s stream, shared by its subscribers, opened by one in a request.
      const events = caller.startActiveSpan('another request', (span) => {
        try {
          return locks.events$.subscribe();
        } finally {
          span.end();
        }
      });
      // A few renewals, long after the acquisition's span and its caller's ended.
      await sleep(1_500);
      events.unsubscribe();
      await handle.release();
      expect(seen.filter((s) => s.what === 'renew').length).toBeGreaterThan(0);
      // The service's change stream and events$'s.
      expect(seen.filter((s) => s.what === 'watch').length).toBe(2);
      expect(seen.filter((s) => s.span !== undefined)).toEqual([]);
    } finally {
      await locks.close();
    }
  });
});

/** `client`, noting which span is active when the library renews a lease or opens a stream. */
function spyingClient(
  client: MongoClient,
  seen: { what: string; span: string | undefined; ended: boolean }[],
): MongoClient {
  const note = (what: string) => {
    const span = trace.getActiveSpan() as unknown as { name?: string; ended?: boolean } | undefined;
    seen.push({ what, span: span?.name, ended: span?.ended ?? false });
  };
  const bindAll = <T extends object>(target: T, property: string | symbol) => {
    const value = Reflect.get(target, property, target) as unknown;
    return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
  };
  const collection = (c: Collection<Document>) =>
    new Proxy(c, {
      get(target, property) {
        const value = Reflect.get(target, property, target) as (...a: unknown[]) => unknown;
        if (property === 'findOneAndUpdate')
          return (...args: unknown[]) => {
            if (commandOf(args).pipeline === RENEW_PIPELINE) note('renew');
            return value.apply(target, args);
          };
        if (property === 'watch')
          return (...args: unknown[]) => {
            note('watch');
            return value.apply(target, args);
          };
        return bindAll(target, property);
      },
    });
  return new Proxy(client, {
    get: (t, property) =>
      property === 'db'
        ? (...args: Parameters<MongoClient['db']>) =>
            new Proxy(t.db(...args), {
              get: (d, p) =>
                p === 'collection'
                  ? (...a: [string]) => collection(d.collection(...a))
                  : bindAll(d, p),
            })
        : bindAll(t, property),
  });
}
