import { waitObservable } from './wait-observable';

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('waitObservable', () => {
  it('emits the value once and completes', async () => {
    const seen: unknown[] = [];
    let completed = false;
    waitObservable(() => Promise.resolve(7), []).subscribe({
      next: (value) => seen.push(value),
      complete: () => (completed = true),
    });
    await settle();
    expect(seen).toEqual([7]);
    expect(completed).toBe(true);
  });

  it('aborts the wait with the reason on unsubscription, and hands a value that still came to late', async () => {
    let signal: AbortSignal | undefined;
    const late: unknown[] = [];
    const seen: unknown[] = [];
    const subscription = waitObservable(
      async (given) => {
        signal = given;
        await settle();
        return 'won';
      },
      [],
      { reason: () => 'unsubscribed', late: (value) => late.push(value) },
    ).subscribe((value) => seen.push(value));
    await Promise.resolve();
    subscription.unsubscribe();
    await settle();
    await settle();
    expect(signal?.aborted).toBe(true);
    expect(signal?.reason).toBe('unsubscribed');
    expect(seen).toEqual([]);
    expect(late).toEqual(['won']);
  });

  it('passes an error on, and aborts the wait when one of its signals does', async () => {
    const errors: unknown[] = [];
    const closing = new AbortController();
    waitObservable(
      (signal) =>
        new Promise<void>((_, reject) =>
          signal.addEventListener('abort', () => reject(signal.reason as Error)),
        ),
      [closing.signal],
    ).subscribe({ error: (error) => errors.push(error) });
    await settle();
    const reason = new Error('closing');
    closing.abort(reason);
    await settle();
    expect(errors).toEqual([reason]);
  });
});
