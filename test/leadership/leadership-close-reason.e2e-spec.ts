import { Injectable } from '@nestjs/common';
import { LockService, OnlyLeader } from '../../lib';
import { LockServiceClosedError } from '../../lib/errors';
import type { LeaderTerm } from '../../lib/leadership/leader-term';
import { eventually, LockTestKit } from '../lock-service/lock-test-kit';
import { lockModule, startAppContext } from '../nest/support/nest-apps';

jest.setTimeout(60_000);

/** A job that keeps the term it ran under, as work that watches its signal would. */
@Injectable()
class ClosingJob {
  static term: LeaderTerm | undefined;

  @OnlyLeader('closing-job', { ttlMs: 10_000 })
  async run(): Promise<boolean> {
    ClosingJob.term = LockService.currentTerm();
    return ClosingJob.term !== undefined;
  }
}

// leadership.md: the term's signal aborts at shutdown with a LockServiceClosedError (work under
// the term learns that the service closed, not that this instance resigned).
describe('leadership: a term ended by shutdown says so', () => {
  const kit = LockTestKit.forSuite();

  it('a term won through terms$ aborts with LockServiceClosedError at close()', async () => {
    const a = await kit.service({ holderId: 'A' });
    let term: LeaderTerm | undefined;
    a.leadership('closing', { ttlMs: 10_000 }).terms$.subscribe((each) => (term = each));
    await eventually(() => term !== undefined);

    await a.close();

    expect(term!.signal.reason).toBeInstanceOf(LockServiceClosedError);
  });

  it("an @OnlyLeader job's term aborts with LockServiceClosedError when the app closes", async () => {
    const app = await startAppContext({
      imports: [lockModule(kit.mongo, { collectionName: kit.collectionName })],
      providers: [ClosingJob],
    });
    try {
      await eventually(() => app.get(LockService).leading.get('closing-job') === true);
      await expect(app.get(ClosingJob).run()).resolves.toBe(true);
    } finally {
      await app.close();
    }

    expect(ClosingJob.term!.signal.reason).toBeInstanceOf(LockServiceClosedError);
  });
});
