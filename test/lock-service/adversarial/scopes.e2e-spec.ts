import { filter, firstValueFrom, take, toArray } from 'rxjs';
import type { CommandStartedEvent, MongoClient } from 'mongodb';
import { LockLostError, LockStoreUnavailableError } from '../../../lib/errors';
import { FaultProxy, passThrough, proxiedUri, proxyTarget } from '../../support/fault-proxy';
import { LockTestKit, eventually } from '../lock-test-kit';
import { describeWithFailPoints, faultTools } from './kit';

jest.setTimeout(60_000);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('adversarial: owner scopes', () => {
  const kit = LockTestKit.forSuite();
  const service = (extra: Record<string, unknown> = {}) =>
    kit.service({ shutdownGraceMs: 100, ...extra });

  it('counts each key of a multi-key scoped acquisition, here and elsewhere', async () => {
    const a = await service();
    const b = await service();
    const here = await a.acquire(['m:1', 'm:2'], { scope: 's' });
    const there = await b.acquire(['m:3', 'm:4'], { scope: 's' });
    expect(await a.releaseScope('s')).toBe(4);
    expect(here.lost).toBe(true);
    for (const key of ['m:1', 'm:2', 'm:3', 'm:4']) {
      expect((await a.inspect(key))?.held).toBe(false);
    }
    void there;
  });

  it.each(['$holder', '$owner', '$$NOW', '{"$gt":""}', 'a.b'])(
    'stores the scope %s literally and releases by it exactly',
    async (scope) => {
      const a = await service();
      const b = await service();
      await b.acquire('lit:1', { scope });
      await b.acquire('lit:2', { scope: 'other' });
      const raw = (await kit.rawLocks()).find((doc) => doc._id === 'lit:1');
      expect((raw?.line as { sc?: string }[])[0].sc).toBe(scope);
      expect(await a.releaseScope(scope)).toBe(1);
      expect((await a.inspect('lit:2'))?.held).toBe(true);
    },
  );

  // On v2 a released event carries no holder id or fence (docs/engine-v2.md).
  it('events$ reports a remote scope release', async () => {
    const observer = await service();
    const a = await service();
    const b = await service({ holderId: 'holder-b' });
    const released = firstValueFrom(
      observer.events$.pipe(
        filter((event) => event.key === 'ev:1' && event.type === 'released'),
        take(1),
      ),
    );
    await sleep(300); // the stream is open
    await b.acquire('ev:1', { scope: 'sess' });
    expect(await a.releaseScope('sess')).toBe(1);
    await expect(released).resolves.toMatchObject({ type: 'released', key: 'ev:1' });
  });

  it('a scoped lock re-acquired without a scope is not released by the old scope', async () => {
    const a = await service();
    const b = await service();
    const first = await b.acquire('re:1', { scope: 'old', ttlMs: 1_000, renew: false });
    await sleep(1_300); // the lease ran out without a release
    const second = await a.acquire('re:1', { timeoutMs: 0 });
    expect(second.fence).toBeGreaterThan(first.fence);
    expect(await b.releaseScope('old')).toBe(0);
    expect(second.lost).toBe(false);
    expect((await b.inspect('re:1'))?.held).toBe(true);
  });

  it('an acquisition waiting for a scoped key gets it once the scope is released, with a larger fence', async () => {
    const a = await service();
    const b = await service();
    const held = await b.acquire('w:1', { scope: 'w', ttlMs: 30_000 });
    const waiting = a.acquire('w:1', { timeoutMs: 10_000 });
    // In line behind the scope's holder: only news of the release can wake it.
    await eventually(async () => (await b.inspect('w:1'))?.waiting === 1);
    const startedAt = performance.now();
    expect(await a.releaseScope('w')).toBe(1);
    const next = await waiting;
    expect(performance.now() - startedAt).toBeLessThan(3_000);
    expect(next.fence).toBeGreaterThan(held.fence);
  });

  it('releaseScope while MongoDB is unreachable fails, bounded, with LockStoreUnavailableError', async () => {
    const proxy = new FaultProxy(proxyTarget(kit.mongo.uri));
    await proxy.start();
    try {
      const locks = await service({
        uri: proxiedUri(kit.mongo.uri, proxy.port),
        operationTimeoutMs: 500,
      });
      const lock = await locks.acquire('down:1', { scope: 'down', ttlMs: 10_000 });
      await locks.acquire('down:2', { scope: 'down', ttlMs: 10_000 });
      proxy.setMode({ blackHole: 'drop' });
      const startedAt = performance.now();
      const outcome = await locks.releaseScope('down').catch((error: unknown) => error);
      const elapsed = performance.now() - startedAt;
      expect(outcome).toBeInstanceOf(LockStoreUnavailableError);
      expect(elapsed).toBeLessThan(3_000);
      expect(lock.lost).toBe(true); // told at once, whatever the network
      proxy.setMode(passThrough);
    } finally {
      await proxy.stop();
    }
  });

  it('a second releaseScope of the same scope in parallel does not double count', async () => {
    const a = await service();
    const b = await service();
    await a.acquire('par:1', { scope: 'p' });
    await b.acquire('par:2', { scope: 'p' });
    const counts = await Promise.all([a.releaseScope('p'), a.releaseScope('p')]);
    expect(counts[0] + counts[1]).toBe(2);
  });

  it('events$ of the releasing service itself reports both releases', async () => {
    const a = await service();
    const b = await service();
    const events = firstValueFrom(
      a.events$.pipe(
        filter((event) => event.type === 'released' && event.key.startsWith('self:')),
        take(2),
        toArray(),
      ),
    );
    await sleep(300);
    await a.acquire('self:1', { scope: 'x' });
    await b.acquire('self:2', { scope: 'x' });
    expect(await a.releaseScope('x')).toBe(2);
    const seen = await events;
    expect(seen.map((event) => event.key).sort()).toEqual(['self:1', 'self:2']);
  });
});

describeWithFailPoints('adversarial: owner scopes, under fail points', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);
  /** Resolves when `client` sends its next `findAndModify` (a leave, or releaseScope's write). */
  const nextWrite = (client: MongoClient) =>
    new Promise<void>((resolve) => {
      const sent = (event: CommandStartedEvent) => {
        if (event.commandName !== 'findAndModify') return;
        client.off('commandStarted', sent);
        resolve();
      };
      client.on('commandStarted', sent);
    });
  /** The app's next `times` findAndModifys each reach MongoDB 1 s late; how often it fired so far. */
  const lateWrites = (times: number) =>
    failPoint(times > 0 ? { times } : 'off', {
      failCommands: ['findAndModify'],
      appName: 'scope-race',
      blockConnection: true,
      blockTimeMS: 1_000,
    });

  // The lease is freed once, by whichever write lands first: releaseScope counts it and the
  // holder's release() rejects with LockLostError (docs: a lost handle's release does), or the
  // release resolves and releaseScope counts nothing. Never both, never another error.
  it.each([
    // The order, which call is on its way first, how many writes are held up, who frees it.
    ['in the same tick', 'neither', 0, 'either'],
    ["the release lands between releaseScope's look and its write", 'release', 2, 'release'],
    ["releaseScope's write lands before a release sent earlier", 'release', 1, 'scope'],
    ["release() is called while releaseScope's write is on its way", 'scope', 1, 'scope'],
  ] as const)(
    'releaseScope racing with the holder releasing itself, %s: counted once or released, never both',
    async (_order, first, late, freedBy) => {
      const client = await appClient('scope-race', { monitorCommands: true });
      const a = await kit.service({ client, shutdownGraceMs: 100 });
      const lock = await a.acquire('race:1', { scope: 'r' });
      const fired = await lateWrites(late);
      const firstWrite = nextWrite(client);
      let count: Promise<number>;
      let released: Promise<unknown>;
      if (first === 'release') {
        released = lock.release().then(
          () => 'released',
          (error: unknown) => error,
        );
        await firstWrite; // the leave, held up
        count = a.releaseScope('r');
      } else {
        count = a.releaseScope('r');
        if (first === 'scope') await firstWrite; // its write, held up
        released = lock.release().then(
          () => 'released',
          (error: unknown) => error,
        );
      }
      const outcome = { count: await count, released: await released };
      // Held up as meant: with two, releaseScope's write was sent, so its look saw the entry.
      expect(await lateWrites(0)).toBe(fired + late);
      const byScope = { count: 1, released: expect.any(LockLostError) };
      const byRelease = { count: 0, released: 'released' };
      if (freedBy === 'either') expect([byScope, byRelease]).toContainEqual(outcome);
      else expect(outcome).toEqual(freedBy === 'scope' ? byScope : byRelease);
      expect(lock.lost).toBe(outcome.count === 1);
      expect((await a.inspect('race:1'))?.held).toBe(false);
    },
  );
});
