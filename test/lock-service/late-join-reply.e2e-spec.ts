// A join whose reply comes after the lease it set would have ended locally (the reply says we
// hold): the call rejoins with a new token, but the first entry may still be live on the server
// (its lease counts from when the join ran, not from when it was sent). Left at once, or the
// call would wait behind its own entry for a whole lease, and everyone else too.
import type { CommandStartedEvent } from 'mongodb';
import { LEAVE_PIPELINE } from '../../lib/store/line/line-pipelines';
import { describeWithFailPoints, faultTools } from './adversarial/kit';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(30_000);

describeWithFailPoints('a join answered after its local lease end', () => {
  const kit = LockTestKit.forSuite();
  const { delayNext, appClient } = faultTools(kit);

  it('leaves the entry it made before holding by its next one', async () => {
    const appName = 'late-join-reply';
    const client = await appClient(appName, { monitorCommands: true });
    const tokens: { join: string[]; leave: string[] } = { join: [], leave: [] };
    client.on('commandStarted', (event: CommandStartedEvent) => {
      const command = event.command;
      if (
        event.commandName !== 'findAndModify' ||
        command.findAndModify !== `${kit.collectionName}_line`
      )
        return;
      const token = (command.let as { t?: string } | undefined)?.t;
      if (!token) return;
      const leave = JSON.stringify(command.update) === JSON.stringify(LEAVE_PIPELINE);
      tokens[leave ? 'leave' : 'join'].push(token);
    });
    const locks = await kit.service({ client });
    // The join reaches MongoDB 1.5 s late: its entry's lease (1 s) starts then, but the call
    // counts it from the send, so the reply (holding) is read after the local lease end.
    await delayNext(appName, 'findAndModify', 1_500);
    const handle = await locks.acquire('late:free', { ttlMs: 1_000, timeoutMs: 10_000 });
    const [first, second] = tokens.join;
    expect(second).toBeDefined();
    expect(first).not.toBe(second);
    // The first entry was left before the call came to hold by the second.
    expect(tokens.leave).toContain(first);
    await handle.release();
  });
});
