import { Controller, Get, Injectable, Logger, Scope } from '@nestjs/common';
import type { INestApplicationContext, ModuleMetadata } from '@nestjs/common';
import { Test } from '@nestjs/testing';
// Observable is imported as a value: the declared return type must be emitted as metadata.
import { firstValueFrom, interval, map, Observable, take, toArray } from 'rxjs';
import {
  InvalidLockKeyError,
  InvalidLockOptionsError,
  Locked,
  LockedDocument,
  MongoLockModule,
  OnlyLeader,
  LockLostError,
  LockNotAcquiredError,
  LockService,
  MongoLockError,
  type LockHandle,
} from '../../lib';
import { eventually } from '../lock-service/lock-test-kit';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { gate, lockModule, startAppContext } from './support/nest-apps';

jest.setTimeout(60_000);

@Injectable()
class Ledger {
  static readonly holds = new Map<string, Promise<void>>();

  /** Reports who holds the lock while the method runs. */
  @Locked('ledger:{args.0}', { timeoutMs: 0 })
  async post(account: string): Promise<{ key?: string }> {
    await Ledger.holds.get(account);
    return { key: LockService.current()?.key };
  }

  @Locked('ledger:{args.0}')
  async fail(_account: string): Promise<never> {
    throw new RangeError('insufficient funds');
  }

  /** Same key as `post`: re-enters from inside it. */
  @Locked('ledger:{args.0}', { timeoutMs: 0 })
  async transfer(account: string): Promise<string | undefined> {
    return (await this.post(account)).key;
  }

  /** Locks the account's audit key too; `ownView` inside re-enters the ledger key alone. */
  @Locked(['audit:{args.0}', 'ledger:{args.0}'], { timeoutMs: 0 })
  async audited(account: string) {
    const outer = LockService.current();
    const inner = await this.ownView(account);
    return {
      outer,
      inner,
      heldAfter: outer?.released === false,
      currentAfter: LockService.current() === outer,
    };
  }

  @Locked('ledger:{args.0}', { timeoutMs: 0 })
  async ownView(_account: string) {
    const lock = LockService.current();
    await lock?.release();
    return { key: lock?.key, keys: lock?.keys, fence: lock?.fence, fences: lock?.fences };
  }

  @Locked('ledger:{args.0.id}')
  async byObject(_account: { id: unknown }): Promise<string> {
    return 'done';
  }

  @Locked('ticker:{args.0}')
  ticks(_name: string): Observable<number> {
    return interval(10).pipe(
      take(3),
      map((tick) => tick),
    );
  }

  @Locked('first:{args.0}', { timeoutMs: 0 })
  first(name: string): Observable<string> {
    return interval(1).pipe(map(() => name));
  }

  @Locked('skipped:{args.0}', { onBusy: 'skip' })
  firstOrSkip(name: string): Observable<string> {
    return interval(1).pipe(map(() => name));
  }

  @Locked('endless:{args.0}')
  endless(_name: string): Observable<number> {
    return interval(10);
  }

  /** The handle `paused` ran under. */
  pausedUnder: LockHandle | undefined;

  /** A short lease, for a pause of the event loop to outlast. */
  @Locked('paused:{args.0}', { ttlMs: 1_000 })
  paused(_name: string): Observable<number> {
    this.pausedUnder = LockService.current();
    return interval(10);
  }
}

@Injectable({ scope: Scope.TRANSIENT })
class TransientLedger {
  @Locked('transient:{args.0}')
  async post(_account: string): Promise<string | undefined> {
    return LockService.current()?.key;
  }
}

@Injectable()
class UsesTransientLedger {
  constructor(readonly ledger: TransientLedger) {}
}

@Injectable({ scope: Scope.REQUEST })
class PerRequestLedger {
  @Locked('per-request')
  async post(): Promise<void> {}
}

@Injectable()
class BaseJob {
  @Locked('job:{args.0}')
  async run(_name: string): Promise<string | undefined> {
    return LockService.current()?.key;
  }
}

/** Overrides without @Locked; its super call runs the locked body. */
@Injectable()
class RetriedJob extends BaseJob {
  override async run(name: string): Promise<string | undefined> {
    return super.run(name);
  }
}

const RUN_NOW = Symbol('runNow');

@Injectable()
class SymbolJob {
  @Locked('symbol-job')
  async [RUN_NOW](): Promise<string | undefined> {
    return LockService.current()?.key;
  }
}

class LeaderBase {
  @OnlyLeader('nightly-report')
  async report(): Promise<string> {
    return 'reported';
  }
}

/** Overrides an @OnlyLeader method without the decorator; super runs it on the leader only. */
@Injectable()
class NightlyReport extends LeaderBase {
  override async report(): Promise<string> {
    return super.report();
  }
}

abstract class ComputeBase {
  @Locked('compute')
  compute(): number {
    return 1;
  }
}

/** Replaces a synchronous @Locked method without calling it: that body never runs. */
@Injectable()
class ReplacesCompute extends ComputeBase {
  override compute(): number {
    return 2;
  }

  @Locked('other')
  async other(): Promise<void> {}
}

class DocumentBase {
  @LockedDocument('nowhere', '{args.0}')
  async touch(_id: string): Promise<string> {
    return 'touched';
  }
}

@Injectable()
class InheritsUnknownDocument extends DocumentBase {
  override async touch(id: string): Promise<string> {
    return super.touch(id);
  }
}

@Controller('base')
class BasePayments {
  @Get('pay')
  @Locked('pay')
  async pay(): Promise<string | undefined> {
    return LockService.current()?.key;
  }
}

/** A route that overrides a locked one without @Locked: requests to it take no lock. */
@Controller('sub')
class SubPayments extends BasePayments {
  @Get('pay')
  override async pay(): Promise<string | undefined> {
    return super.pay();
  }
}

/** A hand-written method decorator that wraps the method and copies no metadata. */
function Timed(): MethodDecorator {
  return (_target, _key, descriptor) => {
    const method = descriptor.value as unknown as (...args: unknown[]) => unknown;
    const timed = function (this: unknown, ...args: unknown[]) {
      return method.apply(this, args);
    };
    (descriptor as PropertyDescriptor).value = timed;
  };
}

/** `@Timed` above `@Locked` replaces the locked route: its requests would take no lock. */
@Controller('timed')
class TimedPayments {
  @Get('pay')
  @Timed()
  @Locked('timed-pay')
  async pay(): Promise<string | undefined> {
    return LockService.current()?.key;
  }
}

@Injectable()
class TimedJob {
  @Timed()
  @OnlyLeader('timed-job')
  async run(): Promise<void> {}
}

/** On a provider, `@Timed` above `@Locked` still calls the locked body: it runs locked. */
@Injectable()
class TimedLedger {
  @Timed()
  @Locked('timed-ledger')
  async post(): Promise<string | undefined> {
    return LockService.current()?.key;
  }
}

/** Below `@Locked`, `@Timed` is what the lock wraps: fine. */
@Injectable()
class TimedInside {
  @Locked('timed-inside')
  @Timed()
  async run(): Promise<string | undefined> {
    return LockService.current()?.key;
  }
}

/** Our decorators stacked keep each other's metadata: no replacement to refuse. */
@Injectable()
class StackedJob {
  @OnlyLeader('stacked-job')
  @Locked('stacked-lock')
  async run(): Promise<string | undefined> {
    return LockService.current()?.key;
  }
}

describe('@Locked provider methods', () => {
  let mongo: TestMongo;
  let appA: INestApplicationContext;
  let appB: INestApplicationContext;

  beforeAll(async () => {
    mongo = await startTestMongo();
    // Two applications in one process, as two instances of a service would be.
    appA = await startAppContext({
      imports: [lockModule(mongo, { holderId: 'A' })],
      providers: [Ledger],
    });
    appB = await startAppContext({
      imports: [lockModule(mongo, { holderId: 'B' })],
      providers: [Ledger],
    });
  });

  afterAll(async () => {
    await appA?.close();
    await appB?.close();
    await mongo?.stop();
  });

  it('locks with each application’s own LockService', async () => {
    for (const [app, holderId] of [
      [appA, 'A'],
      [appB, 'B'],
    ] as const) {
      const hold = gate();
      Ledger.holds.set('acc-1', hold.opened);
      const running = app.get(Ledger).post('acc-1');
      await waitUntilHeld(app.get(LockService), 'ledger:acc-1');
      expect((await app.get(LockService).inspect('ledger:acc-1'))?.holderId).toBe(holderId);
      hold.open();
      expect(await running).toMatchObject({ key: 'ledger:acc-1' });
      Ledger.holds.delete('acc-1');
    }
  });

  it('excludes the other application: its call fails with the typed error', async () => {
    const hold = gate();
    Ledger.holds.set('acc-2', hold.opened);
    const running = appA.get(Ledger).post('acc-2');
    await waitUntilHeld(appA.get(LockService), 'ledger:acc-2');
    const error = await appB
      .get(Ledger)
      .post('acc-2')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    expect((error as LockNotAcquiredError).keys).toEqual(['ledger:acc-2']);
    hold.open();
    await running;
    Ledger.holds.delete('acc-2');
  });

  it('passes the method’s own error through unchanged and releases', async () => {
    await expect(appA.get(Ledger).fail('acc-3')).rejects.toThrow(RangeError);
    expect((await appA.get(LockService).inspect('ledger:acc-3'))?.held).toBe(false);
  });

  it('re-enters a lock on the same key held by the same call chain', async () => {
    await expect(appA.get(Ledger).transfer('acc-4')).resolves.toBe('ledger:acc-4');
    expect((await appA.get(LockService).inspect('ledger:acc-4'))?.held).toBe(false);
  });

  it('a re-entered @Locked method gets its own key and fence from current(), and releases nothing', async () => {
    const locks = appA.get(LockService);
    const { outer, inner, heldAfter, currentAfter } = await appA.get(Ledger).audited('acc-9');
    // Free now: each key's fence is that of its last acquisition, the outer call's.
    const ledgerFence = (await locks.inspect('ledger:acc-9'))?.fence;
    expect(outer?.key).toBe('audit:acc-9');
    expect(ledgerFence).not.toBe(outer?.fence);
    expect(inner).toEqual({
      key: 'ledger:acc-9',
      keys: ['ledger:acc-9'],
      fence: ledgerFence,
      fences: new Map([['ledger:acc-9', ledgerFence]]),
    });
    expect(heldAfter).toBe(true);
    expect(currentAfter).toBe(true);
    // Released by the outer call when it returned, not by the inner call's release().
    expect(outer?.released).toBe(true);
    expect(outer?.lost).toBe(false);
  });

  it('refuses a non-scalar argument with InvalidLockKeyError and writes nothing', async () => {
    await expect(appA.get(Ledger).byObject({ id: { $gt: '' } })).rejects.toThrow(
      InvalidLockKeyError,
    );
    expect(await appA.get(LockService).inspect('ledger:[object Object]')).toBeNull();
  });

  it('holds the lock of a method declared to return an Observable until it completes', async () => {
    const locks = appA.get(LockService);
    const values = firstValueFrom(appA.get(Ledger).ticks('t1').pipe(toArray()));
    await waitUntilHeld(locks, 'ticker:t1');
    expect(await values).toEqual([0, 1, 2]);
    expect((await locks.inspect('ticker:t1'))?.held).toBe(false);
  });

  it('ends a method’s Observable with LockLostError when its lock is lost, and stops its source', async () => {
    const locks = appA.get(LockService);
    let ticks = 0;
    let end!: (outcome: unknown) => void;
    const ended = new Promise<unknown>((resolve) => (end = resolve));
    const subscription = appA
      .get(Ledger)
      .endless('e1')
      .subscribe({ next: () => (ticks += 1), error: end, complete: () => end('completed') });
    try {
      await waitUntilHeld(locks, 'endless:e1');
      expect(await locks.releaseAllHeld()).toBe(1);
      const late = new Promise((resolve) => setTimeout(() => resolve('still running'), 5_000));
      expect(await Promise.race([ended, late])).toBeInstanceOf(LockLostError);
      const atEnd = ticks;
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(ticks).toBe(atEnd);
    } finally {
      subscription.unsubscribe();
    }
  });

  it('passes on no value of a method’s Observable once its lease is past its deadline (the event loop paused past it)', async () => {
    const ledger = appA.get(Ledger);
    const seenAt: number[] = [];
    const ended = new Promise<unknown>((resolve) =>
      ledger.paused('p1').subscribe({ next: () => seenAt.push(Date.now()), error: resolve }),
    );
    await eventually(() => seenAt.length > 0);
    const deadline = ledger.pausedUnder!.expiresAt.getTime();
    // Paused past the whole lease: the interval is due long before the keeper's deadline timer.
    const resumeAt = performance.now() + 1_600;
    while (performance.now() < resumeAt);
    expect(await ended).toBeInstanceOf(LockLostError);
    expect(seenAt.filter((at) => at > deadline)).toEqual([]);
  });

  it('lets a caller that took the first value and left call again at once (its release first)', async () => {
    const ledger = appA.get(Ledger);
    const runs: string[] = [];
    for (let call = 0; call < 10; call += 1) {
      runs.push(await firstValueFrom(ledger.first('f')));
      runs.push(await firstValueFrom(ledger.firstOrSkip('s').pipe(take(1)), { defaultValue: '-' }));
    }
    expect(runs).toEqual(Array.from({ length: 10 }, () => ['f', 's']).flat());
  });

  it('fails rather than run unlocked when the instance is not bound to an application', async () => {
    await expect(new Ledger().post('acc-5')).rejects.toThrow(MongoLockError);
    await expect(new Ledger().post('acc-5')).rejects.toThrow(/not managed by an application/);
  });

  it('binds each instance of a transient provider', async () => {
    const app = await startAppContext({
      imports: [lockModule(mongo)],
      providers: [TransientLedger, UsesTransientLedger],
    });
    try {
      await expect(app.get(UsesTransientLedger).ledger.post('t')).resolves.toBe('transient:t');
    } finally {
      await app.close();
    }
  });

  it('locks an ancestor’s method that an override without @Locked calls through super', async () => {
    const app = await startAppContext({ imports: [lockModule(mongo)], providers: [RetriedJob] });
    try {
      await expect(app.get(RetriedJob).run('nightly')).resolves.toBe('job:nightly');
    } finally {
      await app.close();
    }
  });

  it('binds a provider whose @Locked method is named by a symbol', async () => {
    const app = await startAppContext({ imports: [lockModule(mongo)], providers: [SymbolJob] });
    try {
      await expect(app.get(SymbolJob)[RUN_NOW]()).resolves.toBe('symbol-job');
    } finally {
      await app.close();
    }
  });

  it('stands for an @OnlyLeader name that an override without it reaches through super', async () => {
    const app = await startAppContext({ imports: [lockModule(mongo)], providers: [NightlyReport] });
    try {
      const locks = app.get(LockService);
      await eventually(() => locks.leading.get('nightly-report') === true, 5_000);
      await expect(app.get(NightlyReport).report()).resolves.toBe('reported');
    } finally {
      await app.close();
    }
  });

  it('checks only the methods calls reach: a replaced synchronous @Locked body is no error', async () => {
    const app = await startAppContext({
      imports: [lockModule(mongo)],
      providers: [ReplacesCompute],
    });
    try {
      expect(app.get(ReplacesCompute).compute()).toBe(2);
    } finally {
      await app.close();
    }
  });

  it('fails the start-up for an unknown @LockedDocument name reached through super', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        lockModule(mongo, { isGlobal: true }),
        MongoLockModule.forFeature([{ name: 'known', collection: 'known' }]),
      ],
      providers: [InheritsUnknownDocument],
    }).compile();
    try {
      // Once: a refused start-up closes the LockService, so a second init() finds it closed.
      const refusal: unknown = await moduleRef.init().catch((error: unknown) => error);
      expect(refusal).toBeInstanceOf(InvalidLockOptionsError);
      expect((refusal as Error).message).toMatch(/DocumentBase\.touch names "nowhere"/);
    } finally {
      await moduleRef.close().catch(() => undefined);
    }
  });

  it('warns at start-up about a route that overrides a @Locked one without @Locked', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const moduleRef = await Test.createTestingModule({
      imports: [lockModule(mongo)],
      controllers: [BasePayments, SubPayments],
    }).compile();
    await moduleRef.init();
    try {
      const warnings = warn.mock.calls.map(([message]) => String(message));
      expect(warnings.filter((message) => /overrides .*without @Locked/.test(message))).toEqual([
        expect.stringMatching(/^SubPayments\.pay overrides BasePayments\.pay/),
      ]);
    } finally {
      warn.mockRestore();
      await moduleRef.close();
    }
  });

  it('refuses @Locked or @LockedDocument written above @OnlyLeader, as the class is defined', () => {
    // Every instance would take the lock before @OnlyLeader skipped the body: with onBusy
    // 'skip' (or minHoldMs), a follower's call could keep the leader from running the job.
    const define = (lock: MethodDecorator) => {
      class Job {
        async run(): Promise<void> {}
      }
      const descriptor = Object.getOwnPropertyDescriptor(Job.prototype, 'run')!;
      OnlyLeader('job')(Job.prototype, 'run', descriptor);
      lock(Job.prototype, 'run', descriptor);
    };
    expect(() => define(Locked('job-lock', { onBusy: 'skip' }))).toThrow(
      '@Locked on Job.run is written above @OnlyLeader: every instance would take the lock',
    );
    expect(() => define(LockedDocument('jobs', '{args.0}'))).toThrow(
      /^@LockedDocument on Job\.run is written above @OnlyLeader/,
    );
  });

  it('refuses to start when a decorator above a route’s @Locked or an @OnlyLeader replaced it', async () => {
    const cases: [ModuleMetadata, string][] = [
      [{ controllers: [TimedPayments] }, '@Locked on TimedPayments.pay'],
      [{ providers: [TimedJob] }, '@OnlyLeader on TimedJob.run'],
    ];
    for (const [unit, where] of cases) {
      const moduleRef = await Test.createTestingModule({
        imports: [lockModule(mongo)],
        ...unit,
      }).compile();
      try {
        await expect(moduleRef.init()).rejects.toThrow(
          `${where} was replaced by a decorator applied after it`,
        );
      } finally {
        await moduleRef.close().catch(() => undefined);
      }
    }
    const app = await startAppContext({
      imports: [lockModule(mongo)],
      providers: [TimedInside, StackedJob, TimedLedger],
    });
    try {
      await expect(app.get(TimedInside).run()).resolves.toBe('timed-inside');
      await expect(app.get(TimedLedger).post()).resolves.toBe('timed-ledger');
    } finally {
      await app.close();
    }
  });

  it('warns at start-up about request-scoped providers', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const moduleRef = await Test.createTestingModule({
      imports: [lockModule(mongo)],
      providers: [PerRequestLedger],
    }).compile();
    await moduleRef.init();
    try {
      // Named as every other message names a method, with the cause and what to do.
      expect(warn).toHaveBeenCalledWith(
        'Cannot lock PerRequestLedger.post: PerRequestLedger is request-scoped (declared so, or ' +
          'it injects a request-scoped provider, such as REQUEST), and @Locked needs a static ' +
          '(singleton) provider, so calls to it will fail. Move the method to a singleton ' +
          'provider, or inject LockService and call withLock inside it',
      );
    } finally {
      warn.mockRestore();
      await moduleRef.close();
    }
  });
});

async function waitUntilHeld(locks: LockService, key: string): Promise<void> {
  for (let attempt = 0; attempt < 400; attempt += 1) {
    if ((await locks.inspect(key))?.held) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`${key} never became held`);
}
