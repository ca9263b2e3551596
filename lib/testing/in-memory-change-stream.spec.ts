import { isResumePointLostError } from '../store/mongo-error-codes';
import { toLockEvent } from '../waiting/lock-event';
import { InMemoryChangeLog } from './in-memory-change-log';
import { InMemoryChangeStream } from './in-memory-change-stream';
import { InMemoryLockCollection } from './in-memory-lock-collection';
import type { OpenLockChangeStreamOptions } from '../store/lock-change-stream';

function setUp(kept?: number) {
  const log = new InMemoryChangeLog(kept);
  const collection = new InMemoryLockCollection(() => Date.now(), log);
  const open = (options: OpenLockChangeStreamOptions = {}) =>
    new InMemoryChangeStream(
      log,
      (key) => collection.lookUp(key),
      options,
      () => undefined,
    );
  const acquire = (key: string, owner: string) =>
    collection.acquire({ key, owner, holder: 'h', ttlMs: 30_000 });
  const release = (key: string, owner: string) =>
    collection.release({ key, owner, idleRetentionMs: 0 });
  return { open, acquire, release };
}

async function types(stream: InMemoryChangeStream, count: number): Promise<string[]> {
  const seen: string[] = [];
  while (seen.length < count) {
    const change = await stream.tryNext();
    const event = change && toLockEvent(change);
    if (event) seen.push(`${event.type} ${event.key}`);
  }
  return seen;
}

describe('InMemoryChangeStream', () => {
  it('answers its first tryNext at once, later ones on a change or after maxAwaitTimeMS', async () => {
    const { open, acquire } = setUp();
    const stream = open({ maxAwaitTimeMS: 50 });
    await expect(stream.tryNext()).resolves.toBeNull();
    const started = performance.now();
    await expect(stream.tryNext()).resolves.toBeNull();
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);

    const next = stream.tryNext();
    acquire('a', 'o1');
    await expect(next).resolves.toMatchObject({ operationType: 'insert' });
    await stream.close();
  });

  it('starts at an operation time, inclusive, and filters by scope', async () => {
    const { open, acquire, release } = setUp();
    acquire('a', 'o1');
    const { operationTime } = acquire('b', 'o2');
    release('a', 'o1');
    const all = open({ startAtOperationTime: operationTime });
    await expect(types(all, 2)).resolves.toEqual(['acquired b', 'released a']);
    const releases = open({ startAtOperationTime: operationTime, scope: 'releases' });
    await expect(types(releases, 1)).resolves.toEqual(['released a']);
    await Promise.all([all.close(), releases.close()]);
  });

  it('resumes after its resume token', async () => {
    const { open, acquire, release } = setUp();
    const first = open();
    await first.tryNext();
    acquire('a', 'o1');
    await types(first, 1);
    const token = first.resumeToken;
    await first.close();
    release('a', 'o1');
    const resumed = open({ resumeAfter: token });
    await expect(types(resumed, 1)).resolves.toEqual(['released a']);
    await resumed.close();
  });

  it('fails as the server does when its starting point left the log', async () => {
    const { open, acquire, release } = setUp(2);
    const { operationTime } = acquire('a', 'o1');
    release('a', 'o1');
    acquire('a', 'o2'); // drops the first change
    const error: unknown = await open({ startAtOperationTime: operationTime })
      .tryNext()
      .catch((caught: unknown) => caught);
    expect(isResumePointLostError(error)).toBe(true);
  });
});
