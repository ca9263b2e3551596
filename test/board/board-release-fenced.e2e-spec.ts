// The board's Release frees the holders the page showed (`fences`), never a holder that took
// the key after the page was drawn: then it answers 409 and frees nothing.
import type { INestApplication } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { LockService } from '../../lib';
import { MongoLockBoardModule } from '../../lib/board';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { HTTP_ADAPTERS, lockModule } from '../nest/support/nest-apps';
import { listeningApp, OperatorHeaderGuard, watchBoardLog } from './board-app';

jest.setTimeout(60_000);

describe.each(HTTP_ADAPTERS)('the board releases the holders it showed (%s)', (adapter) => {
  let mongo: TestMongo;
  let app: INestApplication;
  let url: string;
  let locks: LockService;
  let other: LockService;

  const release = (key: string, fences?: string) => {
    const query = new URLSearchParams({ key, ...(fences === undefined ? {} : { fences }) });
    return fetch(`${url}/locks/api/lock/release?${query.toString()}`, {
      method: 'POST',
      headers: { 'x-lock-board': 'release', 'x-operator': 'alice' },
    });
  };
  /** The fences of `key`'s holders as the board's list shows them. */
  const shownFences = async (key: string): Promise<string> => {
    const one = (await (await fetch(`${url}/locks/api/lock?key=${key}`)).json()) as {
      holders: { fence: string }[];
    };
    return one.holders.map((holder) => holder.fence).join(',');
  };

  beforeAll(async () => {
    mongo = await startTestMongo();
    ({ app, url } = await listeningApp(
      {
        imports: [
          lockModule(mongo, { holderId: `board-${adapter}` }),
          MongoLockBoardModule.forRoot({ guard: OperatorHeaderGuard, allowRelease: true }),
        ],
      },
      adapter,
    ));
    locks = app.get(LockService);
    other = new LockService({ uri: mongo.uri, dbName: mongo.dbName, holderId: `other-${adapter}` });
    await other.start();
  });

  afterAll(async () => {
    await other?.close();
    await app?.close();
    await mongo?.stop();
  });

  it('frees nothing when the holder shown released and another took the key: 409, logged', async () => {
    const log = watchBoardLog();
    try {
      const shown = await other.acquire('fenced:changed', { renew: true });
      const fences = await shownFences('fenced:changed');
      expect(fences).toBe(shown.fence.toString());
      // Meanwhile the holder shown releases and others take the key: one here, one elsewhere.
      await shown.release();
      const here = await locks.acquire('fenced:changed', { mode: 'shared', renew: true });
      const there = await other.acquire('fenced:changed', { mode: 'shared', renew: true });

      const response = await release('fenced:changed', fences);
      expect(response.status).toBe(409);
      expect(await response.json()).toMatchObject({
        statusCode: 409,
        message:
          `Nothing released: none of the holders shown (fence ${shown.fence}) holds ` +
          '"fenced:changed" any more. Look at its holders again before releasing.',
      });
      await sleep(300);
      expect(here.lost).toBe(false);
      expect(there.lost).toBe(false);
      const state = await locks.inspect('fenced:changed');
      expect(state?.holders.map((holder) => holder.fence)).toEqual([here.fence, there.fence]);
      expect(log.lines).toEqual([
        expect.stringMatching(/"fenced:changed" asked by "alice" released nothing/),
      ]);

      // The holders shown now: both freed.
      const again = await release('fenced:changed', await shownFences('fenced:changed'));
      expect(again.status).toBe(200);
      expect((await again.json()).released.map((h: { fence: string }) => h.fence)).toEqual([
        here.fence.toString(),
        there.fence.toString(),
      ]);
      expect(here.lost).toBe(true);
    } finally {
      log.restore();
    }
  });

  it('frees the holders shown that still hold, and leaves a holder that came since', async () => {
    const first = await locks.acquire('fenced:some', { mode: 'shared', renew: true });
    const second = await other.acquire('fenced:some', { mode: 'shared', renew: true });
    const fences = await shownFences('fenced:some');
    await second.release();
    const later = await other.acquire('fenced:some', { mode: 'shared', renew: true });
    const response = await release('fenced:some', fences);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({
      key: 'fenced:some',
      released: [{ holderId: `board-${adapter}`, fence: first.fence.toString() }],
    });
    expect(first.lost).toBe(true);
    await sleep(300);
    expect(later.lost).toBe(false);
    expect((await locks.inspect('fenced:some'))?.holderId).toBe(`other-${adapter}`);
    await later.release();
  });

  it.each([
    ['empty', ''],
    ['with a trailing comma', '1,'],
    ['negative', '-16'],
    ['separated by ;', '16;32'],
    ['not digits', 'x'],
    ['of 21 digits', '1'.repeat(21)],
    ['1001 long', Array(1001).fill('16').join(',')],
  ])('answers 400 to fences %s, and frees nothing', async (_, fences) => {
    const held = await locks.acquire('fenced:bad', { renew: true });
    const response = await release('fenced:bad', fences);
    expect(response.status).toBe(400);
    expect((await response.json()).message).toMatch(/^fences must be 1 to 1000 fences/);
    expect(held.lost).toBe(false);
    await held.release();
  });
});
