import { firstValueFrom } from 'rxjs';
import type { Collection, Document } from 'mongodb';
import { LockLostError } from '../../lib/errors';
import { LockTestKit } from '../lock-service/lock-test-kit';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { canEmulate } from '../support/mongo';

jest.setTimeout(60_000);

interface Job extends Document {
  _id: string;
  runs: number;
}

/** Waits on a server without change streams poll; deletes by other code end a hold. */
describe('Document locks without change streams, and deleted documents', () => {
  async function seeded(kit: LockTestKit, name: string): Promise<Collection<Job>> {
    const client = await kit.client();
    const jobs = client.db(kit.mongo.dbName).collection<Job>(name);
    await jobs.insertOne({ _id: 'nightly', runs: 0 });
    return jobs;
  }

  (canEmulate('standalone') ? describe : describe.skip)('a standalone server', () => {
    const kit = LockTestKit.forSuite({ standalone: true });

    it('a waiter gets the document by polling once the holder commits', async () => {
      await seeded(kit, 'jobs_standalone');
      const holder = (await kit.service()).documents<Job>('jobs_standalone');
      const waiter = (await kit.service()).documents<Job>('jobs_standalone');
      const lock = await holder.acquire('nightly');
      const waiting = waiter.acquire('nightly', { timeoutMs: 10_000 });
      await new Promise((resolve) => setTimeout(resolve, 300));
      await lock.commit({ $inc: { runs: 1 } });
      const next = await waiting;
      expect(next.doc.runs).toBe(1);
      expect(next.fence).toBeGreaterThan(lock.fence);
      await next.commit({ $inc: { runs: 1 } });
    });
  });

  describe('a replica set', () => {
    const kit = LockTestKit.forSuite();

    it('a delete by other code frees the document: waiters wake, the holder cannot commit', async () => {
      const jobs = await seeded(kit, 'jobs_deleted');
      const holder = (await kit.service()).documents<Job>('jobs_deleted');
      // Its safety poll is a minute away: only the change stream can tell it in time.
      const watcher = (await kit.service({ safetyPollIntervalMs: 60_000 })).documents<Job>(
        'jobs_deleted',
      );
      const lock = await holder.acquire('nightly');
      const freed = firstValueFrom(watcher.waitForRelease('nightly'));
      await new Promise((resolve) => setTimeout(resolve, 200));
      const started = performance.now();
      await jobs.deleteOne({ _id: 'nightly' });
      await freed;
      // Not told by the stream, it waits for the poll (60 s).
      expect(performance.now() - started).toBeLessThan(1_000 + LOAD_SLACK_MS);
      await expect(lock.commit({ $inc: { runs: 1 } })).rejects.toBeInstanceOf(LockLostError);
      // The library never recreates a deleted document behind its owner's back.
      expect(await jobs.countDocuments({ _id: 'nightly' })).toBe(0);
    });
  });
});
