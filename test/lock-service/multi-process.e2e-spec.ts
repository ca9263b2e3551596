import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import { canEmulate } from '../support/mongo';
import { countCommands, LockTestKit } from './lock-test-kit';

jest.setTimeout(120_000);

describe('LockService across OS processes', () => {
  // The offline server can slow its TTL monitor to a crawl: takeovers must not need it.
  const kit = LockTestKit.forSuite(
    canEmulate('ttlMonitorSleepSecs') ? { ttlMonitorSleepSecs: 3_600 } : undefined,
  );

  it('excludes holders in other processes and grants strictly increasing fences', async () => {
    const counterFile = join(mkdtempSync(join(tmpdir(), 'lock-')), 'counter');
    writeFileSync(counterFile, '0');
    const workers = [1, 2, 3].map(() =>
      kit.worker({ mode: 'contend', key: 'shared', iterations: 8, counterFile, sectionMs: 10 }),
    );
    const reports = await Promise.all(workers.map((worker) => worker.next('done', 100_000)));
    const sections = reports
      .flatMap((report) => report.sections as { fence: string; start: number; end: number }[])
      .sort((a, b) => a.start - b.start);

    // No lost increment: no two read-modify-write sections overlapped.
    expect(Number(readFileSync(counterFile, 'utf8'))).toBe(24);
    expect(sections).toHaveLength(24);
    for (let index = 1; index < sections.length; index += 1) {
      expect(sections[index].start).toBeGreaterThanOrEqual(sections[index - 1].end);
      expect(BigInt(sections[index].fence)).toBeGreaterThan(BigInt(sections[index - 1].fence));
    }
  });

  it('wakes a waiter in this process through the change stream when another process releases', async () => {
    const client = await kit.client({ monitorCommands: true });
    const commands = countCommands(client);
    const locks = await kit.service({ client, ensureIndexes: false });
    // From here: the start reads 0.1's collection once (docs/upgrading.md).
    commands.reset();
    const holder = kit.worker({ mode: 'hold', key: 'job', ttlMs: 60_000 });
    await holder.next('acquired');

    const acquired = locks.acquire('job', { timeoutMs: 30_000 });
    // Let the waiter fail its attempt and start watching before the release.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(locks.diagnostics.waiters).toBe(1);
    holder.send({ type: 'release' });
    const { at: releasedAt } = await holder.next('released');
    const handle = await acquired;
    const acquiredAt = sharedClockMs();

    // Neither the lease (60 s) nor the waiting entry's renewal (a third of its 30 s lease)
    // could have woken it.
    expect(acquiredAt - releasedAt).toBeLessThan(5_000);
    expect(locks.diagnostics.streamsOpened).toBe(1);
    // One join took our place in line; the release event named our entry, which then held by
    // its position: no read, no renewal, no second attempt (docs/engine-v2.md).
    await new Promise((resolve) => setTimeout(resolve, 200));
    const streamCommands = ['aggregate', 'getMore', 'killCursors'];
    expect(commands.names.filter((name) => !streamCommands.includes(name))).toEqual([
      'findAndModify',
    ]);
    const state = await locks.inspect('job');
    expect(state?.holderId).toBe(locks.holderId);
    await handle.release();
  });

  it('takes over the lease of a killed holder when it runs out, without the TTL monitor', async () => {
    const locks = await kit.service();
    const holder = kit.worker({ mode: 'hold', key: 'crashy', ttlMs: 1_500 });
    const { fence } = await holder.next('acquired');
    holder.child.kill('SIGKILL');
    await holder.exited;

    const handle = await locks.acquire('crashy', { timeoutMs: 10_000 });
    expect(handle.fence).toBeGreaterThan(BigInt(fence));
    // The old document was taken over in place, not deleted and recreated.
    expect(await kit.rawLocks()).toHaveLength(1);
    await handle.release();
  });
});
