import { from, lastValueFrom, switchMap } from 'rxjs';
import { LockLostError } from '../../lib/errors';
import { LockTestKit, sleep } from './lock-test-kit';

jest.setTimeout(30_000);

// README.md, "LockService by hand": acquire$ with the release in the job's `finally`, and an
// `error` callback. It showed `finalize(() => void lock.release())` on an unrenewed lock: a job
// that outlived its lease left release()'s LockLostError unhandled (a crash under Node's default).
describe("README's acquire$ example", () => {
  const kit = LockTestKit.forSuite();
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  beforeEach(() => process.on('unhandledRejection', onUnhandled));
  afterEach(() => process.off('unhandledRejection', onUnhandled));

  it('hands a lease lost under the job to the error callback, nothing unhandled', async () => {
    const locks = await kit.service();
    // A job that outlives an unrenewed lease and stops when told, as the README's runJob does.
    const runJob = (signal: AbortSignal) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 1_500);
        signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
      });
    const job$ = locks.acquire$('nightly-job', { timeoutMs: 60_000, ttlMs: 1_000, renew: false });
    const outcome = await lastValueFrom(
      job$.pipe(switchMap((lock) => from(runJob(lock.signal).finally(() => lock.release())))),
    ).catch((error: unknown) => error);
    await sleep(200);
    expect(outcome).toBeInstanceOf(LockLostError);
    expect(unhandled).toEqual([]);
  });
});
