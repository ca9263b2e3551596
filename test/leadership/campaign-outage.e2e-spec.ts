// A campaign while MongoDB cannot be reached reports it as acquire and tryAcquire do
// (docs/outages-and-shutdown.md): with LockStoreUnavailableError, not LockNotAcquiredError,
// once its time runs out with MongoDB silent; a patient campaign waits through a short outage.
import { MongoClient } from 'mongodb';
import { startOfflineMongo } from '@nestjs-mongo-lock/mongo-offline';
import { LockNotAcquiredError, LockStoreUnavailableError } from '../../lib/errors';
import { describeWithFailPoints, faultTools, settleWithin } from '../lock-service/adversarial/kit';
import { leaderKey } from '../../lib/leadership/leader-key';
import { eventually, LockTestKit, sleep } from '../lock-service/lock-test-kit';
import { LOAD_SLACK_MS } from '../support/load-slack';

jest.setTimeout(30_000);

describeWithFailPoints('leadership: a campaign while MongoDB is away', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient, closeAfterTest } = faultTools(kit);

  /** A started service whose MongoDB then stops for good. */
  async function startedThenStopped() {
    const mongo = await startOfflineMongo();
    const client = new MongoClient(mongo.uri, { serverSelectionTimeoutMS: 30_000 });
    closeAfterTest(client);
    await client.connect();
    const locks = await kit.service({ client, operationTimeoutMs: 500 });
    await mongo.stop();
    return locks;
  }

  it('fails with LockStoreUnavailableError, as acquire and tryAcquire do', async () => {
    const locks = await startedThenStopped();

    const [acquired, tried, campaigned, campaignTried] = await Promise.all([
      settleWithin(locks.acquire('gone:k', { timeoutMs: 1_000 }), 5_000),
      settleWithin(locks.tryAcquire('gone:t'), 5_000),
      settleWithin(locks.leadership('gone-wait').campaign({ timeoutMs: 1_000 }), 5_000),
      settleWithin(locks.leadership('gone-try').campaign({ timeoutMs: 0 }), 5_000),
    ]);

    const seen = (settled: { status: string; error?: unknown }) =>
      settled.status === 'rejected' ? (settled.error as Error).name : settled.status;
    expect([acquired, tried, campaigned, campaignTried].map(seen)).toEqual([
      'LockStoreUnavailableError',
      'LockStoreUnavailableError',
      'LockStoreUnavailableError',
      'LockStoreUnavailableError',
    ]);
    // The bounds acquire and tryAcquire have: timeoutMs plus a reply's margin (here 500 ms).
    expect(campaigned.ms).toBeLessThan(1_000 + 500 + LOAD_SLACK_MS);
    expect(campaignTried.ms).toBeLessThan(500 + LOAD_SLACK_MS);
    await settleWithin(locks.close(), 5_000);
  });

  it('already in line when MongoDB goes away: as a waiting acquire, LockStoreUnavailableError', async () => {
    const mongo = await startOfflineMongo();
    const clients = [0, 1].map(
      () => new MongoClient(mongo.uri, { serverSelectionTimeoutMS: 30_000 }),
    );
    clients.forEach(closeAfterTest);
    const [a, b] = await Promise.all(
      clients.map(async (client, i) => {
        await client.connect();
        return kit.service({
          client,
          operationTimeoutMs: 500,
          shutdownGraceMs: 100,
          holderId: `in-line-${i}`,
        });
      }),
    );
    await a.acquire('held', { ttlMs: 30_000 });
    await a.leadership('led', { ttlMs: 30_000 }).campaign();
    const acquiring = settleWithin(b.acquire('held', { ttlMs: 1_500, timeoutMs: 4_000 }), 10_000);
    const campaign = b.leadership('led', { ttlMs: 1_500 }).campaign({ timeoutMs: 4_000 });
    const campaigning = settleWithin(campaign, 10_000);
    // Both in line (answered), then MongoDB stops: their renewals go unanswered.
    await eventually(async () => (await a.inspect('held'))?.waiting === 1);
    await eventually(async () => (await a.inspect(leaderKey('led')))?.waiting === 1);
    await mongo.stop();

    const settled = await Promise.all([acquiring, campaigning]);

    expect(settled.map(({ error }) => (error as Error | undefined)?.name)).toEqual([
      'LockStoreUnavailableError',
      'LockStoreUnavailableError',
    ]);
    await Promise.all([a, b].map((service) => settleWithin(service.close(), 5_000)));
  });

  it('without timeoutMs, waits through the outage until aborted', async () => {
    const locks = await startedThenStopped();

    const abort = new AbortController();
    const campaign = settleWithin(locks.leadership('gone-patient').campaign(abort), 10_000);
    await sleep(2_500);
    abort.abort(new Error('gave up'));

    const settled = await campaign;
    expect(settled.status).toBe('rejected');
    expect((settled.error as Error).message).toBe('gave up');
    await settleWithin(locks.close(), 5_000);
  });

  it('wins once a short outage ends within its timeoutMs', async () => {
    const appName = 'campaign-short-outage';
    const locks = await kit.service({ client: await appClient(appName), operationTimeoutMs: 500 });
    await failPoint('alwaysOn', {
      failCommands: ['findAndModify'],
      appName,
      closeConnection: true,
    });

    const campaign = settleWithin(
      locks.leadership('short-outage').campaign({ timeoutMs: 6_000 }),
      10_000,
    );
    await sleep(1_500);
    await failPoint('off');

    const settled = await campaign;
    expect(settled.status).toBe('resolved');
    await locks.leadership('short-outage').resign();
  });

  it('still fails with LockNotAcquiredError when MongoDB answers and another leads', async () => {
    const leader = await kit.service({ holderId: 'leader' });
    const follower = await kit.service({ holderId: 'follower' });
    const term = await leader.leadership('led').campaign();

    const settled = await settleWithin(
      follower.leadership('led').campaign({ timeoutMs: 300 }),
      5_000,
    );

    expect(settled.error).toBeInstanceOf(LockNotAcquiredError);
    expect(settled.error).not.toBeInstanceOf(LockStoreUnavailableError);
    await term.resign();
  });
});
