import type { Collection, Document } from 'mongodb';
import type { LockService } from '../../lib/lock.service';
import type { MongoLockModuleOptions } from '../../lib/interfaces';
import { LockTestKit, sleep } from '../lock-service/lock-test-kit';

export { sleep };

/** `promise`'s value, or 'timeout' after `ms`. */
export const within = <T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> =>
  Promise.race([promise, sleep(ms).then(() => 'timeout' as const)]);

export const settle = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    (value) => value,
    (error: unknown) => error,
  );

/** A kit, a fresh collection per test holding `{ _id: 'a', n: 0, version: 1, tenant: 't1' }`. */
export function scratchSuite() {
  const kit = LockTestKit.forSuite();
  const state = { name: '', docs: undefined as unknown as Collection<Document>, seq: 0 };
  beforeEach(async () => {
    state.seq += 1;
    state.name = `scratch_${state.seq}`;
    const client = await kit.client();
    state.docs = client.db(kit.mongo.dbName).collection(state.name);
    await state.docs.insertOne({ _id: 'a', n: 0, version: 1, tenant: 't1' } as Document);
  });
  const service = (extra: Partial<MongoLockModuleOptions> = {}): Promise<LockService> =>
    kit.service({ engine: 'v2', shutdownGraceMs: 200, ...extra });
  return { kit, state, service };
}
