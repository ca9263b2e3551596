// A waiting process that finds the key granted to another process (direct-grant.ts) is told the
// grant's lease (GRANT_LEASE_MS), which the grantee's confirmation replaces by its own, perhaps
// much shorter. If the grantee then dies (stops renewing, never releases), the waiter must take
// the key within that shorter lease plus a second, not at the end of the grant's lease. Found by
// test/faults/leadership.fault-spec.ts (leader SIGKILLed, the last candidate elected ~4 s late).
import { attemptAcquire } from '../../lib/store/acquire-attempt';
import type { AcquireAttemptRequest } from '../../lib/store/acquire-attempt';
import { GRANT_LEASE_MS, grantToken } from '../../lib/store/direct-grant';
import type { LockCollection } from '../../lib/store/lock-document';
import { renewLease } from '../../lib/store/renew-lease';
import { LockTestKit, eventually, sleep } from './lock-test-kit';

jest.setTimeout(30_000);

const kit = LockTestKit.forSuite();

type RawDoc = { _id: string; owner?: string | null; grantedTo?: string | null; fence?: unknown };

describe('a waiter behind a grant to another process', () => {
  const key = 'grant-lease';
  const ttlMs = 1_000;

  /** Another process, by raw store commands: it stops (dies) when the test stops calling it. */
  async function rawProcess(holder: string) {
    const client = await kit.client();
    const collection = client.db(kit.mongo.dbName).collection<RawDoc>(kit.collectionName);
    const locks = collection as unknown as LockCollection;
    const attempt = (owner: string, extra: Partial<AcquireAttemptRequest> = {}) =>
      attemptAcquire(locks, client, { key, owner, holder, ttlMs, ...extra });
    return { collection, locks, attempt };
  }

  it('takes the key within the grantee’s own lease plus a second once it dies', async () => {
    // H holds the key (1 s lease) and dies without releasing: it never renews.
    const h = await rawProcess('H');
    expect((await h.attempt('token-h')).won).toBe(true);
    // G waits first: its place in line is the oldest.
    const g = await rawProcess('G');
    const gWaits = await g.attempt('token-g', {
      reservation: 'rG',
      reservationUse: { keep: false, grantable: true },
    });
    expect(gWaits.won).toBe(false);

    // W, a real service, waits behind both.
    const w = await kit.service();
    const started = performance.now();
    const acquired = w.acquire(key, { ttlMs, timeoutMs: 20_000 }).then((handle) => ({
      handle,
      at: performance.now(),
    }));

    // At H's lease end W's attempt frees the key and, in the same write, grants it to G (the
    // oldest place in line): W is told the grant's lease.
    let grant: RawDoc | null = null;
    await eventually(async () => {
      grant = await g.collection.findOne({ _id: key });
      return grant?.grantedTo === 'rG';
    }, 5_000);
    const granted = grant as unknown as RawDoc & { fence: { toString(): string } };
    expect(granted.owner).toBe(grantToken('rG', BigInt(granted.fence.toString())));
    // Let W's attempt come back (it is the one that granted).
    await sleep(100);

    // G takes the grant with its own 1 s lease, renews it twice, and dies.
    const confirmed = await g.attempt('token-g', {
      reservation: 'rG',
      reservationUse: { keep: false, grantable: true, confirmsGrant: true },
    });
    expect(confirmed.won).toBe(true);
    for (let i = 0; i < 2; i++) {
      await sleep(ttlMs / 3);
      expect((await renewLease(g.locks, { key, owner: 'token-g', ttlMs })).renewed).toBe(true);
    }
    const diedAt = performance.now();

    const { handle, at } = await acquired;
    // G's lease ends at most ttlMs after its last renewal: W follows within a second of that.
    expect(at - diedAt).toBeLessThanOrEqual(ttlMs + 1_000);
    // (Before the fix W slept to the grant's lease end, GRANT_LEASE_MS after the grant.)
    expect(at - started).toBeLessThan(ttlMs + GRANT_LEASE_MS);
    await handle.release();
  });
});
