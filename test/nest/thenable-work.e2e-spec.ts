import type { INestApplicationContext } from '@nestjs/common';
import { LockService } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { lockModule, startAppContext } from './support/nest-apps';

jest.setTimeout(60_000);

/** A lazy thenable (as Mongoose queries and Prisma calls are): its work starts in `then`. */
function lazy<T>(work: () => Promise<T>): PromiseLike<T> {
  return {
    then: (onFulfilled, onRejected) => work().then(onFulfilled, onRejected),
  };
}

describe('withLock whose function returns a non-native thenable', () => {
  let mongo: TestMongo;
  let app: INestApplicationContext;

  beforeAll(async () => {
    mongo = await startTestMongo();
    app = await startAppContext({ imports: [lockModule(mongo)] });
  });
  afterAll(async () => {
    await app?.close();
    await mongo?.stop();
  });

  it('runs the thenable’s work under the lock: current() is the handle, a nested call re-enters', async () => {
    const locks = app.get(LockService);
    const seen = await locks.withLock('thenable:1', (outer) =>
      lazy(async () => ({
        current: LockService.current() === outer,
        // Held already, the key is not free: only a re-entered call gets it at once.
        nested: await locks.withLock('thenable:1', (inner) => inner.fence === outer.fence, {
          timeoutMs: 0,
        }),
      })),
    );
    expect(seen).toEqual({ current: true, nested: true });
  });
});
