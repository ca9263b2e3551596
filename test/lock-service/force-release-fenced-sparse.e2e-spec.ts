// Promised (docs/guarantees.md, ForceReleaseOptions): `fences` is 1 to 1,000 bigints from 0n;
// "anything else is an InvalidLockOptionsError", checked before anything is written.
// What happens instead: a sparse array (`[fence, , 5n]`, or `new Array(2)`) passes the check,
// because `forceReleaseFences` (lib/operator-releases.ts) checks each fence with `fences.map`,
// which skips holes; `[...new Set(entries)]` then turns the hole into `undefined`. The local
// holders listed are told they lost the lock (`revokeKey` runs first), then the store's
// `fence / FENCES_PER_ENTRY` throws a TypeError (lib/store/line/line-admin.ts, and
// lib/testing/in-memory-lines.ts), reported as "Lock command forceRelease failed", and the
// holder's held-back release then frees the key: bad input frees a holder and throws a generic
// error. Same on the testing kit.
import { InvalidLockOptionsError } from '../../lib/errors';
import { LockService } from '../../lib';
import { MongoLockTestingModule } from '../../lib/testing';
import { startTestingModule } from '../testing/testing-kit';
import { LockTestKit, sleep } from './lock-test-kit';

jest.setTimeout(60_000);

/** A fences array with a hole, as `[fence, , 5n]` makes it. */
function withHole(fence: bigint): bigint[] {
  // eslint-disable-next-line no-sparse-arrays
  return [fence, , 5n] as bigint[];
}

async function refusesHoles(locks: LockService): Promise<void> {
  const held = await locks.acquire('fenced:holes', { renew: true });
  for (const fences of [withHole(held.fence), new Array<bigint>(2)]) {
    const outcome = await locks.forceRelease('fenced:holes', { fences }).then(
      (released) => ({ released }),
      (error: unknown) => ({ error }),
    );
    expect(outcome).toEqual({ error: expect.any(InvalidLockOptionsError) });
  }
  await sleep(200);
  expect(held.lost).toBe(false);
  expect((await locks.inspect('fenced:holes'))?.holders.map((h) => h.fence)).toEqual([held.fence]);
  await held.release();
}

describe('forceRelease refuses a fences array with holes', () => {
  const kit = LockTestKit.forSuite();

  it('on MongoDB: InvalidLockOptionsError, and the holder keeps the key', async () => {
    await refusesHoles(await kit.service({ holderId: 'A' }));
  });

  it('on the testing kit: the same', async () => {
    const moduleRef = await startTestingModule({
      imports: [MongoLockTestingModule.forRoot({ holderId: 'app' })],
    });
    try {
      await refusesHoles(moduleRef.get(LockService));
    } finally {
      await moduleRef.close();
    }
  });
});
