import { Injectable, type INestApplicationContext, Logger } from '@nestjs/common';
import { Cron, Interval, ScheduleModule } from '@nestjs/schedule';
import type { MongoClient } from 'mongodb';
import { firstValueFrom } from 'rxjs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Locked, LockLostError, LockService } from '../../lib';
import { eventually } from '../lock-service/lock-test-kit';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { gate, lockModule, openLockCollection, startAppContext } from './support/nest-apps';

jest.setTimeout(60_000);

afterEach(() => jest.restoreAllMocks());

/** Run records, shared by every instance of the test's jobs (they live in one process). */
const runs: { job: string; holderId: string; at: number }[] = [];

/** A job as a cron method would be written; the tests call it on their own schedule. */
@Injectable()
class ReportJob {
  static readonly holds = new Map<string, Promise<void>>();

  constructor(private readonly locks: LockService) {}

  @Locked('job:report', { onBusy: 'skip', minHoldMs: 1_500 })
  async run(): Promise<string> {
    runs.push({ job: 'report', holderId: this.locks.holderId, at: Date.now() });
    return this.locks.holderId;
  }

  /** Waits for a test's gate while it holds `job:{args.0}`. */
  @Locked('job:{args.0}', { onBusy: 'skip' })
  async held(name: string): Promise<string> {
    await ReportJob.holds.get(name);
    return this.locks.holderId;
  }

  /** Long enough for the checks made within it (the tests below) on a loaded machine. */
  @Locked('job:min-hold:{args.0}', { onBusy: 'skip', minHoldMs: 3_000 })
  async quick(_name: string, fail = false): Promise<string> {
    if (fail) throw new RangeError('the job failed');
    return 'done';
  }

  /** Counts its runs: the driver runs a transaction's function again after a write conflict. */
  static transactionRuns = 0;

  @Locked('job:min-hold-tx', { onBusy: 'skip', minHoldMs: 3_000, transaction: true })
  async inTransaction(): Promise<string> {
    ReportJob.transactionRuns += 1;
    // A read in the transaction fixes its snapshot: a later write of the lock outside conflicts.
    const session = LockService.current()?.session;
    // The module's own client (the session's, which the driver's typings do not show).
    const client = (session as unknown as { client: MongoClient } | undefined)?.client;
    await client?.db().collection('jobs').findOne({}, { session });
    return 'done';
  }

  /** Holds `job:kept` until a test's gate opens, then keeps it till 1.5 s after the grant. */
  @Locked('job:kept', { minHoldMs: 1_500 })
  async kept(): Promise<void> {
    await ReportJob.holds.get('kept');
  }

  @Locked('job:slow', { onBusy: 'skip', minHoldMs: 1_000 })
  async slow(): Promise<string> {
    await sleep(1_300);
    return 'done';
  }

  /** Loses its own lock while it runs. */
  @Locked('job:revoked', { minHoldMs: 1_000 })
  async revoked(): Promise<string> {
    await this.locks.releaseAllHeld();
    return 'done';
  }

  /** Re-enters the caller's lock: its minHoldMs must not end the caller's hold. */
  @Locked('job:outer', { minHoldMs: 5_000 })
  async inner(): Promise<string | undefined> {
    return LockService.current()?.key;
  }
}

describe('@Locked for scheduled jobs: onBusy and minHoldMs', () => {
  let mongo: TestMongo;
  let appA: INestApplicationContext;
  let appB: INestApplicationContext;
  let collection: Awaited<ReturnType<typeof openLockCollection>>;

  beforeAll(async () => {
    mongo = await startTestMongo();
    // Two instances of one service on one MongoDB.
    appA = await startAppContext({
      imports: [lockModule(mongo, { holderId: 'A' })],
      providers: [ReportJob],
    });
    appB = await startAppContext({
      imports: [lockModule(mongo, { holderId: 'B' })],
      providers: [ReportJob],
    });
    collection = await openLockCollection(mongo);
  });

  afterAll(async () => {
    await collection?.close();
    await appA?.close();
    await appB?.close();
    await mongo?.stop();
  });

  it('onBusy skip: the method does not run and resolves to undefined, logged at debug', async () => {
    const debug = jest.spyOn(Logger.prototype, 'debug');
    const hold = gate();
    ReportJob.holds.set('busy', hold.opened);
    try {
      const first = appA.get(ReportJob).held('busy');
      await waitUntilHeld(appA.get(LockService), 'job:busy');
      const started = performance.now();
      await expect(appB.get(ReportJob).held('busy')).resolves.toBeUndefined();
      // One attempt, no wait for the holder (a wait lasts until the gate opens, after this).
      expect(performance.now() - started).toBeLessThan(2 * LOAD_SLACK_MS);
      expect(debug).toHaveBeenCalledWith(expect.stringMatching(/ReportJob\.held did not run/));
      expect(debug).toHaveBeenCalledWith(expect.stringContaining('"job:busy"'));
      hold.open();
      await expect(first).resolves.toBe('A');
    } finally {
      hold.open();
      ReportJob.holds.delete('busy');
    }
  });

  it('runs once per period across two instances called on the same schedule', async () => {
    const periodMs = 2_000;
    const from = runs.length;
    for (let tick = 0; tick < 3; tick += 1) {
      const tickAt = performance.now();
      const outcomes = await Promise.all([appA.get(ReportJob).run(), appB.get(ReportJob).run()]);
      expect(outcomes.filter((outcome) => outcome !== undefined)).toHaveLength(1);
      // The job finished at once, but its lock is kept for minHoldMs: a second trigger within
      // the period, on either instance, finds it busy.
      await sleep(300);
      const again = await Promise.all([appA.get(ReportJob).run(), appB.get(ReportJob).run()]);
      expect(again).toEqual([undefined, undefined]);
      await sleep(periodMs - (performance.now() - tickAt));
    }
    expect(runs.slice(from).filter((run) => run.job === 'report')).toHaveLength(3);
  });

  it('minHoldMs: sets the lease to end minHoldMs after acquisition and lets it run out', async () => {
    const locks = appA.get(LockService);
    const before = Date.now();
    await expect(appA.get(ReportJob).quick('ok')).resolves.toBe('done');
    // Not released: still owned, by A, with a lease cut from ttlMs (30 s) to about 3 s.
    const state = await locks.inspect('job:min-hold:ok');
    expect(state).toMatchObject({ held: true, holderId: 'A' });
    // What is left depends on how long the call took (on a loaded machine, most of it); the
    // lease itself is checked below. A lease not cut has about 30 s left.
    expect(state!.remainingMs).toBeGreaterThan(0);
    expect(state!.remainingMs).toBeLessThanOrEqual(3_000);
    const leaseMs = state!.expiresAt!.getTime() - before;
    expect(leaseMs).toBeGreaterThanOrEqual(2_900);
    // From before the call: the call's own time counts in it. Not cut, it would be 30 s.
    expect(leaseMs).toBeLessThan(3_000 + LOAD_SLACK_MS);
    // The handle is done: nothing of this instance counts as held, shutdown would not wait.
    expect(locks.diagnostics.held).toBe(0);
    await expect(appB.get(ReportJob).quick('ok')).resolves.toBeUndefined();
    // Past the 3 s lease, which began before this.
    await sleep(3_100);
    expect((await locks.inspect('job:min-hold:ok'))?.held).toBe(false);
    await expect(appB.get(ReportJob).quick('ok')).resolves.toBe('done');
  });

  it('minHoldMs: a caller waiting on another instance takes the lock as the kept lease ends, not at its own next renewal', async () => {
    const hold = gate();
    ReportJob.holds.set('kept', hold.opened);
    const locksB = appB.get(LockService);
    try {
      const run = appA.get(ReportJob).kept();
      await waitUntilHeld(appA.get(LockService), 'job:kept');
      // B's lease is 30 s: it would renew, and find the key free, 10 s into its wait.
      const waiting = locksB.acquire('job:kept', { timeoutMs: 8_000 });
      await eventually(async () => (await locksB.inspect('job:kept'))?.waiting === 1);
      // B read A's 30 s lease as it joined; the kept lease now ends 1.5 s after A's grant.
      hold.open();
      await run;
      const keptUntil = (await locksB.inspect('job:kept'))!.expiresAt!.getTime();
      const handle = await waiting;
      expect(await locksB.inspect('job:kept')).toMatchObject({ held: true, holderId: 'B' });
      // Not before the kept lease ended (by the server's clock, which is this host's).
      expect(Date.now()).toBeGreaterThanOrEqual(keptUntil);
      await handle.release();
    } finally {
      hold.open();
      ReportJob.holds.delete('kept');
    }
  });

  it('minHoldMs: waitForRelease on another instance resolves as the kept lease ends', async () => {
    const hold = gate();
    ReportJob.holds.set('kept', hold.opened);
    // Its safety look a minute away: only the news of the lease cut short can wake it sooner.
    const watcher = new LockService({
      uri: mongo.uri,
      dbName: mongo.dbName,
      holderId: 'C',
      safetyPollIntervalMs: 60_000,
    });
    try {
      await watcher.start();
      const run = appA.get(ReportJob).kept();
      await waitUntilHeld(watcher, 'job:kept');
      // Watched while A's 30 s lease stands: its end is the watcher's next look.
      const freed = firstValueFrom(watcher.waitForRelease('job:kept')).then(() => 'free');
      await sleep(300);
      hold.open();
      await run;
      const keptUntil = (await watcher.inspect('job:kept'))!.expiresAt!.getTime();
      const hung = sleep(20_000, 'hung', { ref: false });
      await expect(Promise.race([freed, hung])).resolves.toBe('free');
      expect(Date.now()).toBeGreaterThanOrEqual(keptUntil);
    } finally {
      hold.open();
      ReportJob.holds.delete('kept');
      await watcher.close();
    }
  });

  it('minHoldMs applies when the method fails too; its error passes through', async () => {
    await expect(appA.get(ReportJob).quick('failing', true)).rejects.toThrow(RangeError);
    expect(await appA.get(LockService).inspect('job:min-hold:failing')).toMatchObject({
      held: true,
      holderId: 'A',
    });
    await expect(appB.get(ReportJob).quick('failing')).resolves.toBeUndefined();
  });

  it('minHoldMs in a transaction: the hold is written after the commit, and the method runs once', async () => {
    const locks = appA.get(LockService);
    await expect(appA.get(ReportJob).inTransaction()).resolves.toBe('done');
    // Written before the commit, the hold conflicted with the transaction's check: run again.
    expect(ReportJob.transactionRuns).toBe(1);
    const state = await locks.inspect('job:min-hold-tx');
    expect(state).toMatchObject({ held: true, holderId: 'A' });
    expect(state!.remainingMs).toBeLessThanOrEqual(3_000);
    expect(locks.diagnostics.held).toBe(0);
    await expect(appB.get(ReportJob).inTransaction()).resolves.toBeUndefined();
  });

  it('minHoldMs: work longer than minHoldMs releases as usual', async () => {
    await expect(appA.get(ReportJob).slow()).resolves.toBe('done');
    expect((await appA.get(LockService).inspect('job:slow'))?.held).toBe(false);
  });

  it('minHoldMs does not end a lock that the call re-entered', async () => {
    const locks = appA.get(LockService);
    await locks.withLock('job:outer', async (outer) => {
      await expect(appA.get(ReportJob).inner()).resolves.toBe('job:outer');
      expect(outer.released).toBe(false);
      expect(outer.lost).toBe(false);
    });
    expect((await locks.inspect('job:outer'))?.held).toBe(false);
  });

  it('minHoldMs does not hide a lease lost while the method ran: LockLostError', async () => {
    await expect(appA.get(ReportJob).revoked()).rejects.toThrow(LockLostError);
    expect((await appA.get(LockService).inspect('job:revoked'))?.held).toBe(false);
  });
});

/** Jobs scheduled by @nestjs/schedule, as deployed on every instance of a service. */
@Injectable()
class ScheduledReports {
  constructor(private readonly locks: LockService) {}

  /** Fires at every even second on every instance at once. */
  @Cron('*/2 * * * * *', { name: 'cron-report' })
  @Locked('job:cron-report', { onBusy: 'skip', minHoldMs: 1_500 })
  async cronReport(): Promise<void> {
    runs.push({ job: 'cron', holderId: this.locks.holderId, at: Date.now() });
  }

  /** Fires every 2 s from each instance's start: the instances' timers are out of step. */
  @Interval('interval-report', 2_000)
  @Locked('job:interval-report', { onBusy: 'skip', minHoldMs: 1_500 })
  async intervalReport(): Promise<void> {
    runs.push({ job: 'interval', holderId: this.locks.holderId, at: Date.now() });
  }
}

describe('@Locked with @nestjs/schedule on two instances', () => {
  let mongo: TestMongo;

  beforeAll(async () => {
    mongo = await startTestMongo();
  });

  afterAll(async () => {
    await mongo?.stop();
  });

  it('runs each job once per period across both instances', async () => {
    const debug = jest.spyOn(Logger.prototype, 'debug');
    const apps: INestApplicationContext[] = [];
    const from = runs.length;
    const start = (holderId: string) =>
      startAppContext({
        imports: [ScheduleModule.forRoot(), lockModule(mongo, { holderId })],
        providers: [ScheduledReports],
      });
    try {
      apps.push(await start('sched-A'));
      // The second instance starts later: its interval fires about 0.8 s after the first's.
      await sleep(800);
      apps.push(await start('sched-B'));
      await sleep(5_700);
    } finally {
      for (const app of apps) await app.close();
    }
    const since = runs.slice(from);
    for (const job of ['cron', 'interval']) {
      const times = since.filter((run) => run.job === job).map((run) => run.at);
      expect(times.length).toBeGreaterThanOrEqual(2);
      // minHoldMs (1.5 s) keeps the lock after each run, so no other run starts sooner,
      // on either instance. Without it the out-of-step instances would both run every period.
      for (let index = 1; index < times.length; index += 1) {
        expect(times[index] - times[index - 1]).toBeGreaterThanOrEqual(1_450);
      }
    }
    // The other instance fired too, and skipped.
    expect(debug).toHaveBeenCalledWith(
      expect.stringMatching(/ScheduledReports\.cronReport did not run/),
    );
    expect(debug).toHaveBeenCalledWith(
      expect.stringMatching(/ScheduledReports\.intervalReport did not run/),
    );
  });
});

async function waitUntilHeld(locks: LockService, key: string): Promise<void> {
  for (let attempt = 0; attempt < 400; attempt += 1) {
    if ((await locks.inspect(key))?.held) return;
    await sleep(25);
  }
  throw new Error(`${key} never became held`);
}
