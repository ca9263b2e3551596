// A join MongoDB is slow to answer is sent again once, not every operationTimeoutMs: more copies
// would only pile onto a server that has fallen behind. The one copy goes straight to the full
// join, which finds the first copy's entry if it landed.
import type { CommandStartedEvent } from 'mongodb';
import { describeWithFailPoints, faultTools } from './adversarial/kit';
import { LockTestKit, eventually } from './lock-test-kit';

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
