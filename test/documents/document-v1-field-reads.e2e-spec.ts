// Upgrading from 0.1 (docs/upgrading.md, docs/engine-v2.md): a document whose lock field is in
// the 0.1 form with a live lease is locked: acquire is refused until that lease ends. The reads
// that say whether a document is locked must agree with that.
import { firstValueFrom } from 'rxjs';
import type { Document } from 'mongodb';
import { LockNotAcquiredError } from '../../lib/errors';
import { LockTestKit } from '../lock-service/lock-test-kit';
import { withOneAccount } from './account-fixture';

jest.setTimeout(30_000);

describe('a document held by a live 0.1 lease', () => {
  const kit = LockTestKit.forSuite();

  async function heldByV1(leaseMs = 20_000) {
    const { accounts, collectionName } = await withOneAccount(kit);
    const v1Lock: Document = {
      owner: 'v1-owner',
      holder: 'v1-service',
      fence: 5_000,
      acquiredAt: new Date(),
      expiresAt: new Date(Date.now() + leaseMs),
    };
    await accounts.updateOne({ _id: 'a' }, { $set: { _lock: v1Lock } });
    const docs = (await kit.service()).documents(collectionName);
    // As documented: refused at once while the 0.1 lease lasts.
    await expect(docs.acquire('a', { timeoutMs: 200 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    return docs;
  }

  it('inspect() reports it held, by the 0.1 holder', async () => {
    const docs = await heldByV1();
    expect(await docs.inspect('a')).toMatchObject({
      held: true,
      holderId: 'v1-service',
      fence: 5_000n,
      mode: 'exclusive',
      holders: [{ holderId: 'v1-service', fence: 5_000n, weight: 1 }],
    });
  });

  it('waitForRelease() does not emit while the 0.1 lease lasts', async () => {
    const docs = await heldByV1();
    const emitted = await Promise.race([
      firstValueFrom(docs.waitForRelease('a')).then(() => 'emitted'),
      new Promise((resolve) => setTimeout(() => resolve('still waiting'), 2_000)),
    ]);
    expect(emitted).toBe('still waiting');
  });

  it('waitForRelease() emits once the 0.1 lease has ended, and the document is then free', async () => {
    const docs = await heldByV1(1_500);
    const startedAt = Date.now();
    await firstValueFrom(docs.waitForRelease('a'));
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(1_000);
    expect(await docs.inspect('a')).toMatchObject({ held: false });
    const lock = await docs.acquire('a', { timeoutMs: 1_000 });
    await lock.release();
  });
});
