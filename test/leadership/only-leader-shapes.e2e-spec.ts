import {
  Controller,
  Get,
  Injectable,
  type INestApplicationContext,
  Logger,
  type OnModuleInit,
} from '@nestjs/common';
import { Interval, ScheduleModule } from '@nestjs/schedule';
import { defer, interval, lastValueFrom, of, take, toArray, type Observable } from 'rxjs';
import { LockService, OnlyLeader } from '../../lib';
import { LEADER_KEY_PREFIX } from '../../lib/leadership/leader-key';
import { eventually, LockTestKit, sleep } from '../lock-service/lock-test-kit';
import { Test } from '@nestjs/testing';
import { lockModule } from '../nest/support/nest-apps';

jest.setTimeout(30_000);

@Injectable()
class IntervalBelow {
  runs = 0;
  @Interval(50)
  @OnlyLeader('interval-below')
  tick(): void {
    this.runs += 1;
  }
}

@Injectable()
class IntervalAbove {
  runs = 0;
  @OnlyLeader('interval-above')
  @Interval(50)
  async tick(): Promise<void> {
    this.runs += 1;
  }
}

@Injectable()
class SyncJob {
  @OnlyLeader('sync-job')
  count(): number {
    return 42;
  }
}

@Injectable()
class StreamJob {
  @OnlyLeader('stream-job')
  fence(): Observable<bigint | undefined> {
    return defer(() => of(LockService.currentTerm()?.fence));
  }

  @OnlyLeader('stream-job')
  ticks(): Observable<number> {
    return interval(20);
  }
}

/** An `async` method resolving to an Observable: it runs when subscribed, outside the term. */
@Injectable()
class AsyncStreamJob {
  @OnlyLeader('async-stream-job')
  async ticks(): Promise<Observable<number>> {
    return Promise.resolve(of(1));
  }
}

/** A lazy thenable, as a Mongoose query: runs only when awaited. */
class LazyQuery implements PromiseLike<number> {
  static runs = 0;
  then<A = number, B = never>(
    onFulfilled?: ((value: number) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): PromiseLike<A | B> {
    LazyQuery.runs += 1;
    return Promise.resolve(1).then(onFulfilled, onRejected);
  }
}

@Injectable()
class QueryJob {
  @OnlyLeader('query-job')
  find(): LazyQuery {
    return new LazyQuery();
  }
}

/** A short lease, for a pause of the event loop to outlast. */
@Injectable()
class PausedStream {
  @OnlyLeader('paused-stream', { ttlMs: 1_000 })
  ticks(): Observable<number> {
    return interval(10);
  }
}

@Injectable()
class EarlyCaller implements OnModuleInit {
  early: unknown = 'not called';
  constructor(private readonly job: IntervalAbove) {}
  async onModuleInit(): Promise<void> {
    this.early = await this.job.tick();
  }
}

/** Watches who leads, as a status page would, from its constructor. */
@Injectable()
class LeaderWatcher {
  constructor(locks: LockService) {
    locks.leadership('pinned').leader$.subscribe();
  }
}

@Injectable()
class PinnedJob {
  @OnlyLeader('pinned', { ttlMs: 5_000 })
  async run(): Promise<string> {
    return 'ran';
  }
}

@Controller('leader')
class LeaderController {
  @Get()
  @OnlyLeader('controller-job')
  async get(): Promise<string> {
    return 'ran';
  }
}

@Injectable()
class TtlA {
  @OnlyLeader('conflict', { ttlMs: 5_000 })
  async run(): Promise<void> {}
}

@Injectable()
class TtlB {
  @OnlyLeader('conflict', { ttlMs: 6_000 })
  async run(): Promise<void> {}
}

describe('leadership: @OnlyLeader', () => {
  const kit = LockTestKit.forSuite();
  const apps: INestApplicationContext[] = [];

  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close().catch(() => undefined);
  });

  async function app(
    providers: unknown[],
    extra: Record<string, unknown> = {},
    controllers: unknown[] = [],
  ) {
    const moduleRef = await Test.createTestingModule({
      imports: [ScheduleModule.forRoot(), lockModule(kit.mongo, { ...kit.options(), ...extra })],
      providers: providers as never[],
      controllers: controllers as never[],
    }).compile();
    moduleRef.useLogger(false);
    apps.push(moduleRef);
    try {
      await moduleRef.init();
    } catch (error) {
      // A failed start-up runs no shutdown hook: close what started (the service's client).
      await moduleRef
        .get(LockService)
        .close()
        .catch(() => undefined);
      throw error;
    }
    return moduleRef as INestApplicationContext;
  }

  it('@Interval above or below @OnlyLeader: scheduled on both apps, runs only on the leader', async () => {
    const a = await app([IntervalBelow, IntervalAbove]);
    const b = await app([IntervalBelow, IntervalAbove]);
    await eventually(
      () =>
        [a, b].filter((x) => x.get(LockService).leading.get('interval-below')).length === 1 &&
        [a, b].filter((x) => x.get(LockService).leading.get('interval-above')).length === 1,
    );
    await sleep(500);
    for (const [job, name] of [
      [IntervalBelow, 'interval-below'],
      [IntervalAbove, 'interval-above'],
    ] as const) {
      const [leader, follower] = a.get(LockService).leading.get(name) ? [a, b] : [b, a];
      expect(leader.get(job).runs).toBeGreaterThan(3);
      expect(follower.get(job).runs).toBe(0);
    }
  });

  it('a synchronous method keeps its synchronous shape on a follower (or is refused at start-up)', async () => {
    const a = await app([SyncJob]);
    const b = await app([SyncJob]);
    await eventually(() => [a, b].some((x) => x.get(LockService).leading.get('sync-job')));
    const [leader, follower] = a.get(LockService).leading.get('sync-job') ? [a, b] : [b, a];
    expect(leader.get(SyncJob).count()).toBe(42);
    expect(follower.get(SyncJob).count()).toBeUndefined();
  });

  it('warns once that an async method resolving to an Observable runs it outside the term', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const a = await app([AsyncStreamJob]);
    await eventually(() => a.get(LockService).leading.get('async-stream-job') === true);
    for (let i = 0; i < 2; i += 1) {
      await expect(lastValueFrom(await a.get(AsyncStreamJob).ticks())).resolves.toBe(1);
    }
    const warnings = warn.mock.calls.filter(([message]) =>
      String(message).startsWith(
        'AsyncStreamJob.ticks is @OnlyLeader and its Promise resolved to an Observable',
      ),
    );
    warn.mockRestore();
    expect(warnings).toHaveLength(1);
  });

  it("returns a synchronous method's thenable as it is, not run", async () => {
    const a = await app([QueryJob]);
    await eventually(() => a.get(LockService).leading.get('query-job') === true);
    const query = a.get(QueryJob).find();
    expect(query).toBeInstanceOf(LazyQuery);
    expect(LazyQuery.runs).toBe(0);
  });

  it('an Observable method runs under the term when subscribed: currentTerm() is set inside', async () => {
    const a = await app([StreamJob]);
    await eventually(() => a.get(LockService).leading.get('stream-job') === true);
    const fence = await lastValueFrom(a.get(StreamJob).fence());
    expect(fence).toBe(a.get(LockService).leadership('stream-job').term?.fence);
  });

  it('an Observable method stops (completes) when the term ends', async () => {
    const a = await app([StreamJob]);
    await eventually(() => a.get(LockService).leading.get('stream-job') === true);
    const seen: number[] = [];
    let completed = false;
    const sub = a
      .get(StreamJob)
      .ticks()
      .subscribe({ next: (n) => seen.push(n), complete: () => (completed = true) });
    await sleep(100);
    await a.get(LockService).leadership('stream-job').term!.resign();
    await sleep(50);
    const atResign = seen.length;
    await sleep(300);
    sub.unsubscribe();
    expect({ completed, emittedAfter: seen.length - atResign }).toEqual({
      completed: true,
      emittedAfter: 0,
    });
  });

  it('an Observable method passes on no value once its term is past its deadline (the event loop paused past the lease)', async () => {
    const a = await app([PausedStream]);
    await eventually(() => a.get(LockService).leading.get('paused-stream') === true);
    const term = a.get(LockService).leadership('paused-stream').term!;
    const seenAt: number[] = [];
    const completed = new Promise<void>((resolve) =>
      a
        .get(PausedStream)
        .ticks()
        .subscribe({ next: () => seenAt.push(Date.now()), complete: resolve }),
    );
    await sleep(100);
    const deadline = term.expiresAt.getTime();
    // Paused past the whole lease, the interval due long before the keeper's deadline timer.
    const resumeAt = performance.now() + 1_600;
    while (performance.now() < resumeAt);
    await completed;
    expect(seenAt.length).toBeGreaterThan(0);
    expect(seenAt.filter((at) => at > deadline)).toEqual([]);
  });

  it('a follower decides at subscription, not at the call: an Observable got while leading, subscribed later, does not run', async () => {
    const a = await app([StreamJob]);
    await eventually(() => a.get(LockService).leading.get('stream-job') === true);
    const later = a.get(StreamJob).ticks().pipe(take(3), toArray());
    await a.get(LockService).leadership('stream-job').term!.resign();
    expect(a.get(LockService).leadership('stream-job').isLeader).toBe(false);
    expect(await lastValueFrom(later, { defaultValue: [] })).toEqual([]);
  });

  it('a method called in a provider onModuleInit (before bootstrap) resolves undefined', async () => {
    const a = await app([IntervalAbove, EarlyCaller]);
    expect(a.get(EarlyCaller).early).toBeUndefined();
  });

  it('conflicting ttlMs between methods fails the start-up', async () => {
    await expect(app([TtlA, TtlB])).rejects.toThrow(/different ttlMs/);
  });

  it('a provider that only watches leader$ (no ttlMs) does not make the start-up fail', async () => {
    const a = await app([LeaderWatcher, PinnedJob]);
    await eventually(() => a.get(LockService).leading.get('pinned') === true);
    await expect(a.get(PinnedJob).run()).resolves.toBe('ran');
  });

  it('@OnlyLeader on a controller method is refused at start-up rather than failing every call', async () => {
    const outcome = await app([], {}, [LeaderController]).then(
      async (a) =>
        a
          .get(LeaderController)
          .get()
          .then(
            (value) => ({ value }),
            (error: unknown) => ({ callFailed: String(error) }),
          ),
      (error: unknown) => ({ startFailed: String(error) }),
    );
    expect(outcome).toHaveProperty('startFailed');
  });

  it('campaigns end at shutdown: the key is free after close()', async () => {
    const a = await app([IntervalAbove]);
    await eventually(() => a.get(LockService).leading.get('interval-above') === true);
    const locks = a.get(LockService);
    const observer = await kit.service();
    await a.close();
    apps.splice(apps.indexOf(a), 1);
    expect(locks.leading.has('interval-above')).toBe(false);
    expect((await observer.inspect(`${LEADER_KEY_PREFIX}interval-above`))?.held).toBe(false);
    await expect(a.get(IntervalAbove).tick()).resolves.toBeUndefined();
  });

  it('enabled: false runs the method; currentTerm() is then undefined (the documented example uses `!`)', async () => {
    const a = await app([StreamJob], { enabled: false });
    expect(await lastValueFrom(a.get(StreamJob).fence())).toBeUndefined();
  });
});
