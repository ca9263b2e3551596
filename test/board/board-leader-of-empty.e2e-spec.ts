/**
 * Promised (docs/lock-board.md, "The JSON API"; board-json.ts `BoardLockJson.leaderOf`):
 * `leaderOf` is "the leadership name when the key is a leadership's (`leader of <name>`), else
 * `null`", and the page shows **leader of name** only for keys of a `leadership(name)`.
 *
 * What happens: a plain key equal to the leadership prefix itself, `nestjs-mongo-lock:leader:`,
 * which no leadership can own (`leaderKey` refuses an empty name), is answered with
 * `leaderOf: ""` by the list, the one-key route and the event stream, and the page shows it as
 * "leader of " (an empty leadership).
 *
 * Where: `leaderNameOf` in lib/leadership/leader-key.ts returns the rest of any key that starts
 * with `LEADER_KEY_PREFIX`, the empty rest included (board-json.ts maps only `undefined` to null).
 */
import type { INestApplication } from '@nestjs/common';
import { LockService, type LockHandle } from '../../lib';
import { MongoLockBoardModule } from '../../lib/board';
import { LEADER_KEY_PREFIX } from '../../lib/leadership/leader-key';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { HTTP_ADAPTERS, lockModule } from '../nest/support/nest-apps';
import { listeningApp, readEvents, type StreamEvent } from './board-app';

jest.setTimeout(60_000);

describe.each(HTTP_ADAPTERS)('a key that is only the leadership prefix (%s)', (adapter) => {
  let mongo: TestMongo;
  let app: INestApplication;
  let url: string;
  let locks: LockService;

  beforeAll(async () => {
    mongo = await startTestMongo();
    ({ app, url } = await listeningApp(
      {
        imports: [
          lockModule(mongo, { holderId: `leader-of-${adapter}` }),
          MongoLockBoardModule.forRoot(),
        ],
      },
      adapter,
    ));
    locks = app.get(LockService);
  });

  afterAll(async () => {
    await app?.close();
    await mongo?.stop();
  });

  it('is no leadership: leaderOf is null in the list, the key route and the event stream', async () => {
    // No leadership can have this key: its name would be empty.
    expect(() => locks.leadership('')).toThrow();
    const stream = await fetch(`${url}/locks/api/events`, { signal: AbortSignal.timeout(20_000) });
    expect(stream.status).toBe(200);
    // Taken once the stream says changes reach it, so that its `acquired` event is streamed.
    let taking: Promise<LockHandle> | undefined;
    const isOurs = (event: StreamEvent) =>
      event.type === 'message' && JSON.parse(event.data).key === LEADER_KEY_PREFIX;
    const heard = readEvents(stream, (events) => {
      const live = events.some((event) => event.type === 'flow' && JSON.parse(event.data).live);
      if (live) taking ??= locks.acquire(LEADER_KEY_PREFIX, { ttlMs: 30_000 });
      return events.some(isOurs);
    });
    const { events } = await heard;
    const handle = await taking!;
    try {
      const key = encodeURIComponent(LEADER_KEY_PREFIX);
      const one = await (await fetch(`${url}/locks/api/lock?key=${key}`)).json();
      const list = await (await fetch(`${url}/locks/api/locks?prefix=${key}`)).json();
      const event = JSON.parse(events.find(isOurs)!.data);
      expect(one).toMatchObject({ key: LEADER_KEY_PREFIX, held: true });
      expect(list.locks.map((lock: { key: string }) => lock.key)).toEqual([LEADER_KEY_PREFIX]);
      expect({
        one: one.leaderOf,
        list: list.locks[0].leaderOf,
        event: event.leaderOf,
      }).toEqual({ one: null, list: null, event: null });
    } finally {
      await handle.release();
    }
  });
});
