// D1: waitForRelease on engine v2 misses the release (or pipeline commit) of a document whose
// lock field has no `lead` yet (never contended): the last leave only truncates `_lock.line`.
import { firstValueFrom } from 'rxjs';
import { scratchSuite, sleep, within } from './helpers';

jest.setTimeout(30_000);

describe('D1 waitForRelease on engine v2', () => {
  const { state, service } = scratchSuite();

  it.each([
    ['release()', (lock: { release(): Promise<unknown> }) => lock.release()],
    ['a pipeline commit', (lock: { commit(u: unknown): Promise<unknown> }) => lock.commit([{ $set: { n: 1 } }])],
  ] as const)('wakes at %s of a document nobody else waited for', async (_label, end) => {
    const holder = (await service()).documents(state.name);
    // The safety poll is a minute away and the lease 20 s: only the change can wake it in time.
    const watcher = (await service({ safetyPollIntervalMs: 60_000 })).documents(state.name);
    const lock = await holder.acquire('a', { ttlMs: 20_000 });
    const freed = firstValueFrom(watcher.waitForRelease('a'));
    await sleep(300);
    await end(lock as never);
    // Observed: 'timeout' (it wakes at the lease end, 20 s later).
    expect(await within(freed, 3_000)).not.toBe('timeout');
  });
});
