import { finalize, from, lastValueFrom, switchMap } from 'rxjs';
import { LockTestKit, sleep } from './lock-test-kit';

jest.setTimeout(30_000);

// README.md, "LockService by hand", shows acquire$ with
// `finalize(() => void lock.release())`. acquire$ does not renew by default, and release()
// rejects with LockLostError once the lease was lost: `void` does not handle that rejection,
// so the README's pattern leaves an unhandled rejection (a crash under Node's default
// --unhandled-rejections=throw) whenever the job outlives its lease.
describe('README acquire$ example', () => {
  const kit = LockTestKit.forSuite();
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  beforeEach(() => process.on('unhandledRejection', onUnhandled));
  afterEach(() => process.off('unhandledRejection', onUnhandled));

  it('releasing as the README shows leaves no unhandled rejection when the lease ran out', async () => {
    const locks = await kit.service();
    // A job that outlives its (unrenewed) lease and stops when told, as the README's runJob does.
    const runJob = (signal: AbortSignal) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 1_500);
        signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
      });
    await lastValueFrom(
      locks
        .acquire$('nightly-job', { timeoutMs: 60_000, ttlMs: 1_000 })
        .pipe(
          switchMap((lock) => from(runJob(lock.signal)).pipe(finalize(() => void lock.release()))),
        ),
    );
    await sleep(200);
    expect(unhandled).toEqual([]);
  });
});
