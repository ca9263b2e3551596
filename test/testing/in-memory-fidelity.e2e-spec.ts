import type { ChangeStreamDocument } from 'mongodb';
import { setTimeout as sleep } from 'node:timers/promises';
import { resolveModuleOptions } from '../../lib/options';
import type { LockDocument } from '../../lib/store/lock-document';
import type { LockChangeScope } from '../../lib/store/lock-change-stream';
import { LockStore } from '../../lib/store/lock-store';
import { EXCLUSIVE, type LockModeRequest } from '../../lib/store/lock-modes';
import { RELEASED_OWNERS_KEPT } from '../../lib/store/release-lease';
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
  | 'attempt'
  | 'renew'
  | 'release'
  | 'inspect'
  | 'openChangeStream'
  | 'close'
  | 'withdraw'
  | 'releaseScope'
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

/**
 * More releases of one key than it remembers: the ring of released owners wraps, and a
 * retried release is recognised only while its entry is kept.
 */
async function runRingScript(store: Store): Promise<unknown[]> {
  const replies: unknown[] = [];
  const releases = RELEASED_OWNERS_KEPT + 3;
  for (let i = 0; i < releases; i++) {
    const outcome = await store.attempt('ring', `t${i}`, 30_000, noLateWin);
    replies.push(['attempt', i, outcome.won]);
    replies.push(['release', i, (await store.release('ring', `t${i}`)).outcome]);
  }
  for (const i of [0, 2, 3, releases - 1]) {
    replies.push(['retried', i, (await store.release('ring', `t${i}`)).outcome]);
  }
  // A token takes the key, releases it, takes it again and loses it: its remembered release
  // does not count once that first lease would have ended.
  const last = 'again';
  replies.push(['first', (await store.attempt('ring', last, 40, noLateWin)).won]);
  replies.push(['released', (await store.release('ring', last)).outcome]);
  replies.push(['again', (await store.attempt('ring', last, 40, noLateWin)).won]);
  await sleep(80);
  replies.push(['taken', (await store.attempt('ring', 'other', 30_000, noLateWin)).won]);
  replies.push(['lost', (await store.release('ring', last)).outcome]);
  // The same within the first lease: a release by fence is recognised for that lease only.
  const token = 'by-fence';
  await store.release('ring', 'other');
  const first = await store.attempt('ring', token, 30_000, noLateWin);
  const fence = first.won ? first.fence : -1n;
  for (const retry of [false, true]) {
    replies.push(['by fence', retry, (await store.release('ring', token, { fence })).outcome]);
  }
  const second = await store.attempt('ring', token, 40, noLateWin);
  await sleep(80);
  replies.push(['taken', (await store.attempt('ring', 'another', 30_000, noLateWin)).won]);
  const lost = await store.release('ring', token, { fence: second.won ? second.fence : -1n });
  replies.push(['lost by fence', lost.outcome]);
  // Recognised by its fence even after its lease would have ended.
  await store.release('ring', 'another');
  const short = await store.attempt('ring', 'short', 40, noLateWin);
  const shortFence = short.won ? short.fence : -1n;
  replies.push(['short', (await store.release('ring', 'short', { fence: shortFence })).outcome]);
  await sleep(80);
  const retried = await store.release('ring', 'short', { fence: shortFence });
  replies.push(['retried after its lease', retried.outcome]);
  // A caller handed the lock within a lease releases with a later fence of its block: the
  // ring remembers that fence, not the lease's first.
  const handed = await store.attempt('ring', 'handed', 30_000, noLateWin);
  const firstFence = handed.won ? handed.fence : -1n;
  const own = { fence: firstFence + 2n };
  replies.push(['handed', (await store.release('ring', 'handed', own)).outcome]);
  replies.push(['handed retried', (await store.release('ring', 'handed', own)).outcome]);
  const byFirst = await store.release('ring', 'handed', { fence: firstFence });
  replies.push(['by the first fence', byFirst.outcome]);
  return replies;
}

const SHARED: LockModeRequest = { mode: 'shared', permits: undefined, weight: 1 };
const semaphore = (permits: number, weight = 1): LockModeRequest => ({
  mode: 'shared',
  permits,
  weight,
});

/**
 * Shared locks and semaphores: grants, fairness reservations, conflicts, the holder entries'
 * renewals and releases (retried, of an ended lease), withdrawals, releaseScope. Owner tokens
 * and reservation names are the same on both stores, so the entries' slots are too.
 */
async function runModesScript(first: Store, second: Store): Promise<unknown[]> {
  const replies: unknown[] = [];
  const attempt = async (
    store: Store,
    key: string,
    owner: string,
    mode: LockModeRequest = EXCLUSIVE,
    extra: { reservation?: string; scope?: string; ttlMs?: number } = {},
  ) => {
    await sleep(3);
    try {
      const outcome = await store.attempt(
        key,
        owner,
        extra.ttlMs ?? 30_000,
        noLateWin,
        undefined,
        { mode, ...(extra.scope === undefined ? {} : { scope: extra.scope }) },
        extra.reservation,
      );
      replies.push([
        'attempt',
        key,
        owner,
        outcome.won,
        outcome.holderId,
        outcome.remainingMs > 0,
        outcome.won
          ? 'won'
          : outcome.reservedMs === undefined
            ? 'none'
            : outcome.reservedMs > 5_000,
      ]);
    } catch (error) {
      replies.push(['attempt', key, owner, (error as Error).name, (error as Error).message]);
    }
  };
  const release = async (store: Store, key: string, owner: string) =>
    replies.push(['release', key, owner, await store.release(key, owner)]);
  const inspect = async (key: string) => {
    const state = await first.inspect(key);
    replies.push([
      'inspect',
      key,
      state && {
        ...state,
        fence: typeof state.fence,
        remainingMs: state.remainingMs > 0,
        acquiredAt: state.acquiredAt !== null,
        expiresAt: state.expiresAt !== null,
        holders: state.holders.map((holder) => ({
          ...holder,
          fence: typeof holder.fence,
          remainingMs: holder.remainingMs > 0,
        })),
      },
    ]);
  };

  await attempt(first, 'k', 'e:s1', SHARED); // insert
  await attempt(second, 'k', 'e:s2', SHARED);
  await attempt(first, 'k', 'x1', EXCLUSIVE, { reservation: 'r1' }); // waits, reserves
  await attempt(second, 'k', 'e:s3', SHARED, { reservation: 'r2' }); // behind the writer
  await attempt(second, 'k', 'e:s4', SHARED); // not waiting: no reservation
  await inspect('k');
  replies.push(['renew', (await first.renew('k', 'e:s1', 30_000)).renewed]);
  await release(first, 'k', 'e:s1');
  await release(first, 'k', 'e:s1'); // a retry recognises its success
  await attempt(first, 'k', 'x1', EXCLUSIVE, { reservation: 'r1' }); // one shared holder left
  await release(second, 'k', 'e:s2');
  await attempt(first, 'k', 'x1', EXCLUSIVE, { reservation: 'r1' }); // the head wins
  await attempt(second, 'k', 'e:s3', SHARED, { reservation: 'r2' });
  await attempt(second, 'k', 'e:q', semaphore(3)); // in use in another form
  await inspect('k');
  await release(first, 'k', 'x1');
  await attempt(second, 'k', 'e:s3', SHARED, { reservation: 'r2' });
  await attempt(first, 'k', 'x2', EXCLUSIVE, { reservation: 'r9' });
  first.withdraw('k', 'r9');
  await sleep(50);
  await inspect('k');
  await attempt(second, 'k', 'e:s5', SHARED, { scope: 'tenant' });
  replies.push(['releaseScope', await first.releaseScope('tenant')]);
  await release(second, 'k', 'e:s5'); // released by scope meanwhile
  await release(second, 'k', 'e:s3');
  await inspect('k');

  await attempt(first, 'q', 'e:q1', semaphore(3, 2)); // insert
  await attempt(second, 'q', 'e:q2', semaphore(3, 2), { reservation: 'r3' }); // no room
  await attempt(second, 'q', 'e:q3', semaphore(3)); // room held for the wide waiter
  await attempt(first, 'q', 'e:q4', SHARED); // conflicts
  await attempt(first, 'q', 'x3'); // conflicts
  await attempt(first, 'q', 'e:q5', semaphore(2)); // conflicts
  await inspect('q');
  await release(first, 'q', 'e:q1');
  await attempt(second, 'q', 'e:q2', semaphore(3, 2), { reservation: 'r3' });
  await attempt(second, 'q', 'e:q3', semaphore(3));
  await inspect('q');
  await release(second, 'q', 'e:q2');
  await release(second, 'q', 'e:q3');
  await release(second, 'q', 'e:q3');
  await attempt(first, 'q', 'x4');

  await attempt(first, 't', 'e:t1', SHARED, { ttlMs: 40 });
  await sleep(80); // its lease ends unrenewed
  replies.push(['renew', (await first.renew('t', 'e:t1', 30_000)).renewed]);
  await attempt(second, 't', 'x5'); // an exclusive grant leaves the ended entry
  await release(first, 't', 'e:t1');
  await release(second, 't', 'x5');
  await attempt(second, 't', 'e:t2', SHARED); // an entry's grant drops it
  await release(first, 't', 'e:t1');
  await release(second, 't', 'e:t2');
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
      removedFields: [...(change.updateDescription.removedFields ?? [])].sort(),
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

  it('remembers released owners in a ring, writing and streaming one entry per release', async () => {
    const [mongoStore, mongoUnused] = await mongoStores('locks_ring');
    const [memoryStore, memoryUnused] = memoryStores();
    try {
      let mongoReplies: unknown[] = [];
      let memoryReplies: unknown[] = [];
      const mongoChanges = await drain(mongoStore, 'releases', async () => {
        mongoReplies = await runRingScript(mongoStore);
      });
      const memoryChanges = await drain(memoryStore, 'releases', async () => {
        memoryReplies = await runRingScript(memoryStore);
      });
      expect(memoryReplies).toEqual(mongoReplies);
      expect(memoryChanges).toEqual(mongoChanges);
      // t0 to t2 were overwritten (t1 is not retried); t3 and later are recognised.
      expect(memoryReplies.slice(-14)).toEqual([
        ['first', true],
        ['released', 'released'],
        ['again', true],
        ['taken', true],
        ['lost', 'lost'],
        ['by fence', false, 'released'],
        ['by fence', true, 'released'],
        ['taken', true],
        ['lost by fence', 'lost'],
        ['short', 'released'],
        ['retried after its lease', 'released'],
        ['handed', 'released'],
        ['handed retried', 'released'],
        ['by the first fence', 'lost'],
      ]);
      expect(memoryReplies.slice(-18, -14).map((reply) => (reply as unknown[])[2])).toEqual([
        'lost',
        'lost',
        'released',
        'released',
      ]);
      // Past the wrap, a release's event names one entry of the ring.
      const last = memoryChanges.at(-1) as { updatedFields: string[] };
      expect(last.updatedFields.filter((field) => field.startsWith('releasedOwners'))).toEqual([
        'releasedOwners.8.fence',
        'releasedOwners.8.owner',
        'releasedOwners.8.until',
      ]);
    } finally {
      await Promise.all([mongoStore, mongoUnused, memoryStore, memoryUnused].map((s) => s.close()));
    }
  });

  it.each(['ownership', 'releases'] as const)(
    'gives the same replies and %s change events for shared locks and semaphores',
    async (scope) => {
      const [mongoFirst, mongoSecond] = await mongoStores(`modes_${scope}`);
      const [memoryFirst, memorySecond] = memoryStores();
      try {
        let mongoReplies: unknown[] = [];
        let memoryReplies: unknown[] = [];
        const mongoChanges = await drain(mongoFirst, scope, async () => {
          mongoReplies = await runModesScript(mongoFirst, mongoSecond);
        });
        const memoryChanges = await drain(memoryFirst, scope, async () => {
          memoryReplies = await runModesScript(memoryFirst, memorySecond);
        });
        expect(memoryReplies).toEqual(mongoReplies);
        expect(memoryChanges).toEqual(mongoChanges);
        // Grants of entries move `fence`; releases, withdrawals and a reservation that shrank
        // count in `frees`.
        expect(memoryChanges.length).toBe(scope === 'ownership' ? 24 : 12);
      } finally {
        await Promise.all(
          [mongoFirst, mongoSecond, memoryFirst, memorySecond].map((s) => s.close()),
        );
      }
    },
  );
});
