import { Injectable } from '@nestjs/common';
import { LockNotAcquiredError, LockService, OnlyLeader } from '../../lib';
import { LEADER_KEY_PREFIX } from '../../lib/leadership/leader-key';
import { LockTestingStore, MongoLockTestingModule } from '../../lib/testing';
import { Test } from '@nestjs/testing';
import { eventually } from './testing-kit';

jest.setTimeout(30_000);

@Injectable()
class Projector {
  @OnlyLeader('projector')
  async tick(): Promise<bigint | undefined> {
    return LockService.currentTerm()?.fence;
  }
}

describe('leadership under MongoLockTestingModule', () => {
  it('follows while another instance leads, and leads once it lets go', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [MongoLockTestingModule.forRoot()],
      providers: [Projector],
    }).compile();
    moduleRef.useLogger(false);
    const other = await moduleRef
      .get(LockTestingStore)
      .holdAs(`${LEADER_KEY_PREFIX}projector`, 'other-instance', 5_000);
    await moduleRef.init(); // campaigns for 'projector' from bootstrap
    const locks = moduleRef.get(LockService);
    await expect(moduleRef.get(Projector).tick()).resolves.toBeUndefined();
    expect(locks.leading.get('projector')).toBe(false);

    await other.release();
    await eventually(() => locks.leading.get('projector') === true);
    const fence = await moduleRef.get(Projector).tick();
    expect(fence).toBeGreaterThan(other.fence);
    await moduleRef.close();
  });

  it('after init(), a test waits for the first election with campaign(), as docs/testing.md says', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [MongoLockTestingModule.forRoot({ shutdownGraceMs: 0 })],
      providers: [Projector],
    }).compile();
    moduleRef.useLogger(false);
    await moduleRef.init();
    // Shares the module's place in line: resolves with the term the module's campaign wins.
    const term = await moduleRef.get(LockService).leadership('projector').campaign();
    await expect(moduleRef.get(Projector).tick()).resolves.toBe(term.fence);
    // Another instance is made to lead before init(): now the module's campaign is in line.
    await expect(
      moduleRef.get(LockTestingStore).holdAs(`${LEADER_KEY_PREFIX}projector`, 'other-instance'),
    ).rejects.toBeInstanceOf(LockNotAcquiredError);
    await moduleRef.close();
  });
});
