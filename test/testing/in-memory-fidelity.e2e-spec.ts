import type { ChangeStreamDocument } from 'mongodb';
import { setTimeout as sleep } from 'node:timers/promises';
import { resolveModuleOptions } from '../../lib/options';
import type { LockDocument } from '../../lib/store/lock-document';
import type { LockChangeScope } from '../../lib/store/lock-change-stream';
import { LockStore } from '../../lib/store/lock-store';
import { LockTestingStore } from '../../lib/testing';
import { toLockEvent } from '../../lib/waiting/lock-event';
import { startTestMongo, type TestMongo } from '../support/mongo';

jest.setTimeout(60_000);

/**
 * The in-memory store must answer and stream as the MongoDB store does. One script of
 * commands runs against both; their replies and change events are compared, less what
 * differs by nature (clocks, fences' values, resume tokens).
 */
type Store = Pick<
  LockStore,
  'attempt' | 'renew' | 'release' | 'inspect' | 'openChangeStream' | 'close'
>;

const noLateWin = () => undefined;

async function runScript(first: Store, second: Store): Promise<unknown[]> {
  const replies: unknown[] = [];
  const attempt = async (store: Store, owner: string) => {
    // Apart in time, so that a retaken lease's `acquiredAt` and `expiresAt` change.
    await sleep(3);
    const outcome = await store.attempt('k', owner, 30_000, noLateWin);
    replies.push(['attempt', owner, outcome.won, outcome.holderId, outcome.remainingMs > 29_000]);
  };
  const release = async (store: Store, owner: string) =>
    replies.push(['release', owner, await store.release('k', owner)]);
  const inspect = async () => {
    const state = await first.inspect('k');
    replies.push(['inspect', state?.held, state?.holderId, Object.keys(state ?? {}).sort()]);
  };

  await attempt(first, 'o1'); // insert
  await attempt(first, 'o2'); // held: no-op
  await inspect();
  const renewed = await first.renew('k', 'o1', 30_000);
  replies.push(['renew', renewed.renewed]);
  await release(first, 'o1');
  await release(first, 'o1'); // a retry recognises its success
  await inspect();
  await attempt(first, 'o3'); // same holder again: `holder` does not change
  await release(first, 'o2'); // never ours
  await attempt(second, 'o4'); // held by the first
  await release(first, 'o3');
  await attempt(second, 'o4'); // another holder takes it: `holder` changes
  replies.push(['renew', (await second.renew('k', 'o3', 30_000)).renewed]);
  await release(second, 'o4');
  return replies;
}

function describeChange(change: ChangeStreamDocument<LockDocument>) {
  const event = toLockEvent(change);
  const common = {
    operationType: change.operationType,
    key: 'documentKey' in change ? change.documentKey._id : undefined,
    event: event && [event.type, event.holderId, event.fence !== null],
    clusterTime: 'clusterTime' in change && change.clusterTime !== undefined,
  };
  if (change.operationType === 'insert') {
    return { ...common, fullDocument: Object.keys(change.fullDocument).sort() };
  }
  if (change.operationType === 'update') {
    const updated = change.updateDescription.updatedFields ?? {};
    return {
      ...common,
      updatedFields: Object.keys(updated).sort(),
      owner: updated.owner,
      holder: updated.holder,
      fullDocument: change.fullDocument && Object.keys(change.fullDocument).sort(),
    };
  }
  return common;
}

/** Every change a stream reports until it has been quiet for a while. */
async function drain(store: Store, scope: LockChangeScope, run: () => Promise<unknown>) {
  const stream = store.openChangeStream({ scope, maxAwaitTimeMS: 200 });
  await stream.tryNext(); // established: what follows is reported
  await run();
  const changes: unknown[] = [];
  for (let quiet = 0; quiet < 3;) {
    const change = await stream.tryNext();
    if (change) changes.push(describeChange(change));
    else quiet += 1;
  }
  await stream.close();
  return changes;
}

describe('the in-memory store against the MongoDB store', () => {
  let mongo: TestMongo;

  beforeAll(async () => {
    mongo = await startTestMongo();
  });

  afterAll(async () => {
    await mongo?.stop();
  });

  async function mongoStores(collectionName: string): Promise<[LockStore, LockStore]> {
    const open = (holderId: string) =>
      LockStore.open(
        resolveModuleOptions({ uri: mongo.uri, dbName: mongo.dbName, collectionName, holderId }),
      );
    return [await open('first'), await open('second')];
  }

  function memoryStores(): [Store, Store] {
    const store = new LockTestingStore();
    const connect = (holderId: string) =>
      store.connect(resolveModuleOptions({ uri: 'mongodb://in-memory.invalid', holderId }));
    return [connect('first'), connect('second')];
  }

  it.each(['ownership', 'releases'] as const)(
    'gives the same replies and %s change events',
    async (scope) => {
      const [mongoFirst, mongoSecond] = await mongoStores(`locks_${scope}`);
      const [memoryFirst, memorySecond] = memoryStores();
      try {
        let mongoReplies: unknown[] = [];
        let memoryReplies: unknown[] = [];
        const mongoChanges = await drain(mongoFirst, scope, async () => {
          mongoReplies = await runScript(mongoFirst, mongoSecond);
        });
        const memoryChanges = await drain(memoryFirst, scope, async () => {
          memoryReplies = await runScript(memoryFirst, memorySecond);
        });
        expect(memoryReplies).toEqual(mongoReplies);
        expect(memoryChanges).toEqual(mongoChanges);
        expect(memoryChanges.length).toBe(scope === 'ownership' ? 6 : 3);
      } finally {
        await Promise.all(
          [mongoFirst, mongoSecond, memoryFirst, memorySecond].map((s) => s.close()),
        );
      }
    },
  );
});
