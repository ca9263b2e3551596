import { describeWithFailPoints, faultTools } from '../lock-service/adversarial/kit';
import { LockTestKit } from '../lock-service/lock-test-kit';

jest.setTimeout(60_000);

// leadership.md, campaign(): a timeout rejects "never before the candidate's join is answered,
// or has gone unanswered as long as a try's reply may take" (1 s here); a campaign that waits,
// called while a `timeoutMs: 0` try is under way, stands once that try is refused. Its timeout
// must then run from its own join's answer, not from the try's.
describeWithFailPoints('leadership: a campaign that waits, called during a try', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, failPointFired, appClient } = faultTools(kit);

  it("times out from its join's answer, not from the try's refusal", async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B', client: await appClient('candidate-b') });
    const held = await a.leadership('try-then-join', { ttlMs: 10_000 }).campaign();
    // b's first command (the try) runs at once; the second (the join) reaches MongoDB 700 ms
    // late, well within the 1 s a try's reply may take.
    const fired = await failPoint(
      { skip: 1, times: 1 },
      {
        failCommands: ['findAndModify'],
        appName: 'candidate-b',
        blockConnection: true,
        blockTimeMS: 700,
      },
    );
    const leadership = b.leadership('try-then-join', { ttlMs: 10_000 });
    const trying = leadership.campaign({ timeoutMs: 0 });
    const waiting = leadership.campaign({ timeoutMs: 200 });
    await expect(trying).rejects.toThrow(/was not won within 0 ms/);
    // The leader steps down while b's join is on its way: that join, once answered, wins.
    await held.resign();
    await failPointFired(fired + 1);

    const outcome = await waiting.then(
      (term) => `won, fence ${term.fence > held.fence}`,
      (error: Error) => `${error.name}: ${error.message}`,
    );

    expect(outcome).toBe('won, fence true');
  });
});
