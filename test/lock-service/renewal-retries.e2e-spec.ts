// A renewal MongoDB is slow to answer is sent again once, not at every retry: more copies would
// only pile onto a server that has fallen behind. The copy that answers times the lease from its
// own send, never from the later try that took its reply.
import { describeWithFailPoints, faultTools } from './adversarial/kit';
import { LockTestKit, eventually } from './lock-test-kit';

jest.setTimeout(30_000);

describeWithFailPoints('a renewal answered late', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it('is sent twice at most while unanswered, and the lease counts from the first copy', async () => {
    const appName = 'renewal-answered-late';
    const client = await appClient(appName, { monitorCommands: true });
    const locks = await kit.service({ client, operationTimeoutMs: 200 });
    const ttlMs = 4_000;
    // After the acquisition's join, every findAndModify (the renewals) is answered 1.5 s late:
    // seven operation timeouts. The first renewal is sent a third into the lease.
    await failPoint(
      { skip: 1 },
      { failCommands: ['findAndModify'], appName, blockConnection: true, blockTimeMS: 1_500 },
    );
    const handle = await locks.acquire('late-renewal:k', { ttlMs, renew: true });
    const acquiredExpiry = handle.expiresAt.getTime();
    const renewals: { at: number; query: unknown }[] = [];
    let firstAnsweredAt = Infinity;
    client.on('commandStarted', (event) => {
      if (event.commandName === 'findAndModify') {
        renewals.push({ at: Date.now(), query: event.command.query });
      }
    });
    client.on('commandSucceeded', (event) => {
      if (event.commandName === 'findAndModify')
        firstAnsweredAt = Math.min(firstAnsweredAt, Date.now());
    });
    // Renewed: its lease ends later (by more than `expiresAt`'s clock conversion may move).
    const renewed = () => handle.expiresAt.getTime() > acquiredExpiry + 500;
    await eventually(() => Promise.resolve(renewed()), 5_000);
    await failPoint('off');

    const beforeAnswer = renewals.filter(({ at }) => at <= firstAnsweredAt);
    expect(beforeAnswer).toHaveLength(2);
    expect(beforeAnswer[0].query).toEqual({
      _id: 'late-renewal:k',
      'line.t': expect.any(String) as string,
    });
    // Counted from the first copy's send, though a later try took its reply.
    expect(handle.expiresAt.getTime()).toBeLessThanOrEqual(beforeAnswer[0].at + ttlMs);
    expect(handle.lost).toBe(false);
    await handle.release();
  });
});
