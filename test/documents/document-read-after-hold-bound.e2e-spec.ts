import type { Document } from 'mongodb';
import { LockStoreUnavailableError } from '../../lib/errors';
import { LockTestKit, eventually, sleep } from '../lock-service/lock-test-kit';
import { faultTools, settleWithin } from '../lock-service/adversarial/kit';
import { LOAD_SLACK_MS } from '../support/load-slack';

jest.setTimeout(60_000);

/**
 * A waiting document lock that comes to hold by a renewal (the lease ahead ran out: no write
 * read the document for it) reads the document before it is handed out. docs/outages-and-
 * shutdown.md: an acquisition settles within `timeoutMs` + 1 s (or + `operationTimeoutMs` if
 * shorter) whether MongoDB is frozen or dead; that read counts in it.
 */
describe('a document lock whose read of the held document goes unanswered', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);

  it('settles within timeoutMs + 1 s, and leaves the document unlocked', async () => {
    const name = 'read_after_hold';
    const plain = await kit.client();
    await plain
      .db(kit.mongo.dbName)
      .collection<Document>(name)
      .insertOne({ _id: 'd' as never });
    const holder = (await kit.service({ shutdownGraceMs: 100 })).documents(name);
    const client = await appClient('doc-read');
    const waiter = (
      await kit.service({ client, operationTimeoutMs: 8_000, shutdownGraceMs: 100 })
    ).documents(name);
    // A holder that never releases (a process that died): its lease ends in 1 s.
    await holder.acquire('d', { ttlMs: 1_000 });
    const timeoutMs = 1_500;
    const acquiring = settleWithin(waiter.acquire('d', { timeoutMs }), 20_000);
    await sleep(300);
    // From now on MongoDB answers none of the waiter's reads (its lock writes still land).
    await failPoint('alwaysOn', {
      failCommands: ['find'],
      appName: 'doc-read',
      blockConnection: true,
      blockTimeMS: 15_000,
    });
    const outcome = await acquiring;
    // Broken: the read waits its whole operationTimeoutMs (8 s), past the call's bound.
    expect(outcome.ms).toBeLessThan(timeoutMs + 1_000 + LOAD_SLACK_MS);
    expect(outcome.status).toBe('rejected');
    expect((outcome as { error?: unknown }).error).toBeInstanceOf(LockStoreUnavailableError);
    await failPoint('off');
    // The entry it held is given back: nobody holds the document.
    await eventually(async () => (await holder.inspect('d'))?.held === false);
  });
});
