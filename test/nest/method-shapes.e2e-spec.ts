import { Controller, Get, Injectable, Logger, SetMetadata } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { lastValueFrom, Observable, take } from 'rxjs';
import { Locked, LockService, MongoLockError } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { lockModule, startAppContext } from './support/nest-apps';

jest.setTimeout(60_000);

@Injectable()
class SyncReports {
  @Locked('reports:{args.0}')
  build(id: string): string {
    return `report ${id}`;
  }
}

@Injectable()
class UnannotatedReports {
  @Locked('reports:plain')
  build() {
    return 'report';
  }
}

/** Declared to return a Promise without being `async`: fine, callers already await it. */
@Injectable()
class PromiseReports {
  @Locked('reports:{args.0}')
  build(id: string): Promise<string | undefined> {
    return Promise.resolve(LockService.current()?.key ?? `unlocked ${id}`);
  }
}

/** A synchronous handler that Nest calls itself, as `@SubscribeMessage` marks it. */
@Injectable()
class GatewayLike {
  @SetMetadata('websockets:message_mapping', true)
  @Locked('gateway:{args.1.id}')
  onPing(): string {
    return 'pong';
  }
}

@Controller('shapes')
class SyncController {
  @Get()
  @Locked('shapes')
  get(): string {
    return 'ok';
  }
}

/** Declared to return an Observable, but returns a value (a cast hides it from the compiler). */
@Injectable()
class MisdeclaredStream {
  @Locked('reports:misdeclared')
  build(): Observable<string> {
    return 'report' as unknown as Observable<string>;
  }
}

/** An `async` method whose result is an Observable: it runs once the Promise has settled. */
@Injectable()
class StreamReports {
  @Locked('reports:stream')
  async build(): Promise<Observable<string | undefined>> {
    return new Observable((subscriber) => subscriber.next(LockService.current()?.key));
  }
}

/** A method handing back a cursor: its caller reads it after the release. */
@Injectable()
class CursorReports {
  @Locked('reports:cursor')
  async build(): Promise<AsyncIterable<number>> {
    return (async function* () {
      yield* [1, 2];
    })();
  }
}

/** As a compiler without decorator metadata (esbuild, SWC without it) would leave it. */
class UntypedReports {
  build(): string {
    return LockService.current()?.key ?? 'unlocked';
  }
}
Injectable()(UntypedReports);
const untypedBuild = Object.getOwnPropertyDescriptor(UntypedReports.prototype, 'build')!;
Locked('reports:untyped')(UntypedReports.prototype, 'build', untypedBuild);
Object.defineProperty(UntypedReports.prototype, 'build', untypedBuild);

describe('@Locked on methods that cannot be awaited', () => {
  let mongo: TestMongo;

  beforeAll(async () => {
    mongo = await startTestMongo();
  });

  afterAll(async () => {
    await mongo?.stop();
  });

  afterEach(() => jest.restoreAllMocks());

  it.each([
    ['declared to return a value', SyncReports],
    ['without an annotation or async', UnannotatedReports],
  ])('refuses to start with a provider method %s, naming it', async (_label, provider) => {
    const moduleRef = await Test.createTestingModule({
      imports: [lockModule(mongo)],
      providers: [provider],
    }).compile();
    moduleRef.useLogger(false);
    const error = await moduleRef.init().then(
      () => undefined,
      (failure: unknown) => failure,
    );
    await moduleRef.close();
    expect(error).toBeInstanceOf(MongoLockError);
    expect((error as Error).message).toContain(`${provider.name}.build is @Locked`);
    expect((error as Error).message).toMatch(/Make it `async`, or declare `: Promise<T>`/);
  });

  it('accepts a method declared to return a Promise without async, and locks it', async () => {
    const app = await startAppContext({
      imports: [lockModule(mongo)],
      providers: [PromiseReports],
    });
    try {
      await expect(app.get(PromiseReports).build('7')).resolves.toBe('reports:7');
    } finally {
      await app.close();
    }
  });

  it('accepts synchronous handlers that Nest calls itself (controllers, gateways)', async () => {
    const app = await startAppContext({
      imports: [lockModule(mongo)],
      controllers: [SyncController],
      providers: [GatewayLike],
    });
    await app.close();
  });

  it('without type metadata, starts, locks, and warns once that the method should be async', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const app = await startAppContext({
      imports: [lockModule(mongo)],
      providers: [UntypedReports],
    });
    try {
      const reports = app.get(UntypedReports);
      await expect(reports.build()).resolves.toBe('reports:untyped');
      await expect(reports.build()).resolves.toBe('reports:untyped');
      const warnings = warn.mock.calls.filter(([message]) =>
        String(message).includes('UntypedReports.build is @Locked and returned a plain value'),
      );
      expect(warnings).toHaveLength(1);
    } finally {
      await app.close();
    }
  });

  it('errors with MongoLockError when a method declared Observable returns something else', async () => {
    const app = await startAppContext({
      imports: [lockModule(mongo)],
      providers: [MisdeclaredStream],
    });
    try {
      const error = await lastValueFrom(app.get(MisdeclaredStream).build()).catch((e) => e);
      expect(error).toBeInstanceOf(MongoLockError);
      expect((error as Error).message).toBe(
        'MisdeclaredStream.build is declared to return an Observable but returned something else',
      );
    } finally {
      await app.close();
    }
  });

  it('warns once that an async method resolving to an Observable ran it after the release', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const app = await startAppContext({ imports: [lockModule(mongo)], providers: [StreamReports] });
    try {
      const reports = app.get(StreamReports);
      for (let i = 0; i < 2; i += 1) {
        const stream = await reports.build();
        await expect(lastValueFrom(stream.pipe(take(1)))).resolves.toBeUndefined();
      }
      const warnings = warn.mock.calls.filter(([message]) =>
        String(message).startsWith(
          'StreamReports.build is @Locked and its Promise resolved to an Observable',
        ),
      );
      expect(warnings).toHaveLength(1);
    } finally {
      await app.close();
    }
  });

  it('warns once that a method returning a cursor (an async iterable) is read after the release', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const app = await startAppContext({ imports: [lockModule(mongo)], providers: [CursorReports] });
    try {
      const reports = app.get(CursorReports);
      for (let i = 0; i < 2; i += 1) {
        const read: number[] = [];
        for await (const value of await reports.build()) read.push(value);
        expect(read).toEqual([1, 2]);
      }
      const messages = warn.mock.calls.map(([message]) => String(message));
      const warnings = messages.filter((message) =>
        message.startsWith('CursorReports.build is @Locked and returned an async iterable'),
      );
      expect(warnings).toHaveLength(1);
      expect(messages.filter((message) => message.includes('returned a plain value'))).toEqual([]);
    } finally {
      await app.close();
    }
  });
});
