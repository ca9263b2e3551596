// `@Locked(..., { minHoldMs })` lets the lease run out instead of releasing: one renewal per key,
// sent together, that ends it at minHoldMs. When one key's renewal finds its entry gone (an
// operator freed it while the method ran, unheard here: no change stream) and another key's
// renewal fails in passing, the loss was dropped: the caller got the method's result and a
// warning ("minHoldMs not kept"); it now rejects with LockLostError. Without the fault, the same call rejects with
// LockLostError naming minhold:b (seen while writing this test): the work ran without that key.
import { Injectable } from '@nestjs/common';
import type { INestApplicationContext } from '@nestjs/common';
import { Locked, LockLostError, MongoLockModule } from '../../lib';
import { startAppContext } from '../nest/support/nest-apps';
import { LockTestKit } from './lock-test-kit';
import { describeWithFailPoints, failedKeysOf, faultTools } from './adversarial/kit';

jest.setTimeout(60_000);

let during: () => Promise<void> = async () => undefined;

@Injectable()
class Jobs {
  @Locked(['minhold:a', 'minhold:b'], { minHoldMs: 10_000, ttlMs: 20_000 })
  async both(): Promise<string> {
    await during();
    return 'done';
  }
}

describeWithFailPoints('a multi-key @Locked with minHoldMs whose second key was freed', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, appClient } = faultTools(kit);
  let app: INestApplicationContext | undefined;

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it("rejects with LockLostError though the other key's renewal failed in passing", async () => {
    const appName = 'mk-minhold';
    const operator = await kit.service();
    const client = await appClient(appName, { monitorCommands: true });
    const failedKeys = failedKeysOf(client);
    app = await startAppContext({
      imports: [
        MongoLockModule.forRoot({
          client,
          dbName: kit.mongo.dbName,
          collectionName: kit.collectionName,
          changeStreams: 'off',
        }),
      ],
      providers: [Jobs],
    });
    during = async () => {
      expect(await operator.forceRelease('minhold:b')).toHaveLength(1);
      // The first lock write after the method returns fails in passing (Interrupted):
      // minhold:a's renewal, sent first, while minhold:b's finds its entry gone.
      await failPoint(
        { times: 1 },
        { failCommands: ['findAndModify'], appName, errorCode: 11601, errorLabels: [] },
      );
    };
    const outcome = await app
      .get(Jobs)
      .both()
      .catch((error: unknown) => error);
    await failPoint('off');
    expect(failedKeys).toEqual(['minhold:a']);
    // Broken: 'done' (and a warning), the loss of minhold:b dropped.
    expect(outcome).toBeInstanceOf(LockLostError);
  });
});
