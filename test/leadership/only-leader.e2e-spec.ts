import { Injectable, Logger, type INestApplicationContext } from '@nestjs/common';
import { Observable, lastValueFrom, of, toArray } from 'rxjs';
import { setTimeout as sleep } from 'node:timers/promises';
import { LockService, OnlyLeader, MongoLockError } from '../../lib';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { lockModule, startAppContext } from '../nest/support/nest-apps';

jest.setTimeout(60_000);

/** A job as it would be written with @Cron; the tests call it on their own schedule. */
@Injectable()
class DigestJob {
  constructor(private readonly locks: LockService) {}

  @OnlyLeader('digest')
  counts(): Observable<number> {
    return of(1, 2, 3);
  }

  /** Its lease is the leadership's: long, so that one left to run out is told from a resign. */
  @OnlyLeader('digest', { ttlMs: 10_000 })
  async send(): Promise<{ holderId: string; fence: bigint; aborted: boolean }> {
    const term = LockService.currentTerm();
    if (!term) throw new Error('no term inside @OnlyLeader');
    return { holderId: this.locks.holderId, fence: term.fence, aborted: term.signal.aborted };
  }
}

describe('@OnlyLeader', () => {
  let mongo: TestMongo;
  let appA: INestApplicationContext;
  let appB: INestApplicationContext;

  beforeAll(async () => {
    mongo = await startTestMongo();
    appA = await startAppContext({
      imports: [lockModule(mongo, { holderId: 'A' })],
      providers: [DigestJob],
    });
    appB = await startAppContext({
      imports: [lockModule(mongo, { holderId: 'B' })],
      providers: [DigestJob],
    });
  });

  afterAll(async () => {
    await appA?.close();
    await appB?.close();
    await mongo?.stop();
  });

  it('runs on exactly one instance, under its term; the other resolves undefined, logged at debug', async () => {
    await waitFor(() => leaders().length === 1);
    const [leader, follower] = appA.get(LockService).leading.get('digest')
      ? [appA, appB]
      : [appB, appA];
    const debug = jest.spyOn(Logger.prototype, 'debug');
    const ran = await leader.get(DigestJob).send();
    expect(ran).toMatchObject({ holderId: leader.get(LockService).holderId, aborted: false });
    expect(ran.fence).toBe(leader.get(LockService).leadership('digest').term?.fence);
    await expect(follower.get(DigestJob).send()).resolves.toBeUndefined();
    expect(debug).toHaveBeenCalledWith(expect.stringMatching(/DigestJob\.send skipped/));
    expect(await lastValueFrom(leader.get(DigestJob).counts().pipe(toArray()))).toEqual([1, 2, 3]);
    expect(await lastValueFrom(follower.get(DigestJob).counts().pipe(toArray()))).toEqual([]);
    debug.mockRestore();
  });

  it('the other instance takes over at once when the leader shuts down', async () => {
    await waitFor(() => leaders().length === 1);
    const [leader, follower] = appA.get(LockService).leading.get('digest')
      ? [appA, appB]
      : [appB, appA];
    const before = await leader.get(DigestJob).send();
    const closedAt = performance.now();
    await leader.close();
    // Waited for past the bound: a lease left to run out fails the bound, not the wait.
    await waitFor(() => follower.get(LockService).leading.get('digest') === true, 15_000);
    // Resigned, not left to run out: a lease renewed every third of its 10 s has over 6 s
    // left at close.
    expect(performance.now() - closedAt).toBeLessThan(1_800 + LOAD_SLACK_MS);
    const after = await follower.get(DigestJob).send();
    expect(after?.fence).toBeGreaterThan(before.fence);
  });

  it('refuses to run on an instance Nest did not create', async () => {
    const stray = new DigestJob(undefined as unknown as LockService);
    await expect(stray.send()).rejects.toBeInstanceOf(MongoLockError);
  });

  it('refuses bad names when the class is declared', () => {
    expect(() => OnlyLeader('')).toThrow(/non-empty/);
    expect(() => OnlyLeader('x', { ttlMs: 10 })).toThrow(/ttlMs/);
  });

  function leaders(): string[] {
    return [appA, appB]
      .map((app) => app.get(LockService))
      .filter((locks) => locks.leading.get('digest') === true)
      .map((locks) => locks.holderId);
  }
});

async function waitFor(condition: () => boolean, withinMs = 5_000): Promise<void> {
  const endsAt = performance.now() + withinMs;
  while (!condition()) {
    if (performance.now() > endsAt) throw new Error('condition not met in time');
    await sleep(10);
  }
}
