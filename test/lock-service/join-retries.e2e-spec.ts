// A join MongoDB is slow to answer is sent again once, not every operationTimeoutMs: more copies
// would only pile onto a server that has fallen behind. The one copy goes straight to the full
// join, which finds the first copy's entry if it landed.
import type { CommandStartedEvent } from 'mongodb';
import type { AcquireOptions } from '../../lib/interfaces/lock-options.interface';
import type { LockService } from '../../lib/lock.service';
import { describeWithFailPoints, faultTools } from './adversarial/kit';
import { withReplyDelayProxy } from '../support/reply-delay-proxy';
import { LockTestKit, eventually, sleep } from './lock-test-kit';

jest.setTimeout(30_000);

describeWithFailPoints('a join answered late', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient, rawLock } = faultTools(kit);

  it('is sent twice at most while unanswered, and the wait takes the first reply', async () => {
    const appName = 'join-answered-late';
    const client = await appClient(appName, { monitorCommands: true });
    const joins: CommandStartedEvent[] = [];
    client.on('commandStarted', (event) => {
      if (event.commandName === 'findAndModify') joins.push(event);
    });
    const locks = await kit.service({ client, operationTimeoutMs: 200 });
    // Every join is answered 1.5 s late: seven operation timeouts.
    await failPoint('alwaysOn', {
      failCommands: ['findAndModify'],
      appName,
      blockConnection: true,
      blockTimeMS: 1_500,
    });

    const handle = await locks.acquire('late-join:k', { timeoutMs: 10_000 });
    // Both copies answered (the second finds the first's entry and writes nothing).
    await eventually(() => Promise.resolve(joins.length === 2 && handle.fence > 0), 3_000);
    await new Promise((resolve) => setTimeout(resolve, 1_700));
    await failPoint('off');

    expect(joins).toHaveLength(2);
    // The copy is the full join, not the short one whose filter its own entry would miss.
    expect(joins[1].command.query).toEqual({ _id: 'late-join:k' });
    const line = (await rawLock('late-join:k'))?.line as { t: string }[];
    expect(line).toHaveLength(1);
    await handle.release();
    expect((await rawLock('late-join:k'))?.line ?? []).toEqual([]);
  });
});

describe('a join answered after its lease ended', () => {
  const kit = LockTestKit.forSuite();

  it.each(['a key', 'a document'])(
    'on %s does not make its caller a holder: it joins again, behind who took it',
    async (what) => {
      await withReplyDelayProxy(kit, async (proxy, uri) => {
        const late = await kit.service({ uri, operationTimeoutMs: 200 });
        const other = await kit.service();
        const client = await kit.client();
        await client
          .db(kit.mongo.dbName)
          .collection('stale')
          .replaceOne({ _id: 'd' as never }, {}, { upsert: true });
        // Document locks hand a hold out as the line gives it; key locks check a short lease.
        const locks = (service: LockService) =>
          what === 'a key'
            ? { acquire: (options: AcquireOptions) => service.acquire('stale-reply', options) }
            : {
                acquire: (options: AcquireOptions) =>
                  service.documents('stale').acquire('d', options),
              };
        await late.acquire('warm').then((handle) => handle.release());
        // The join lands and holds for 1 s; its reply, and its copy's, come 1.5 s later.
        const landed = proxy.holdNextReply('findAndModify', 1_500);
        const acquiring = locks(late).acquire({ ttlMs: 1_000, timeoutMs: 10_000 });
        await landed;
        void proxy.holdNextReply('findAndModify', 1_500);
        // Its entry's lease ends unrenewed: the other service takes the key meanwhile.
        const taken = await locks(other).acquire({ timeoutMs: 5_000 });
        await sleep(1_000);
        await taken.release();

        const handle = await acquiring;
        expect(handle.fence).toBeGreaterThan(taken.fence);
        expect(handle.lost).toBe(false);
        await handle.release();
      });
    },
  );
});
