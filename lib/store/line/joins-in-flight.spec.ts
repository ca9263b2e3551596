import { LockStoreUnavailableError } from '../../errors/lock-store-unavailable.error';
import { JoinsInFlight } from './joins-in-flight';

/** The entries the joins still keep (private state: what must not grow). */
function kept(joins: JoinsInFlight): number {
  const inside = joins as unknown as {
    unclaimed: Map<string, unknown>;
    unsettled: Map<string, unknown>;
  };
  return inside.unclaimed.size + inside.unsettled.size;
}

function later<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((settle) => (resolve = settle));
  return { promise, resolve };
}

describe('JoinsInFlight', () => {
  it('keeps nothing once a join is answered', async () => {
    const joins = new JoinsInFlight();
    await expect(joins.join('k', 't', 1_000, () => Promise.resolve('placed'))).resolves.toBe(
      'placed',
    );
    expect(kept(joins)).toBe(0);
  });

  it('keeps nothing once a join is refused, and the refusal decides the try', async () => {
    const joins = new JoinsInFlight();
    const refused = joins.join('k', 't', 1_000, () =>
      Promise.reject(new Error('no such document')),
    );
    await expect(refused).rejects.toThrow('no such document');
    expect(kept(joins)).toBe(0);
  });

  it('sends a copy once while the first is unanswered, then takes the first reply of either', async () => {
    const joins = new JoinsInFlight();
    const first = later<string>();
    const sent: boolean[] = [];
    const send = (retry: boolean) => {
      sent.push(retry);
      return sent.length === 1 ? first.promise : new Promise<string>(() => undefined);
    };
    for (let i = 0; i < 3; i++) {
      await expect(joins.join('k', 't', 10, send)).rejects.toBeInstanceOf(
        LockStoreUnavailableError,
      );
    }
    expect(sent).toEqual([false, true]);
    // Answered after its try stopped waiting: the next try takes it, sending nothing.
    first.resolve('placed');
    await first.promise;
    await expect(joins.join('k', 't', 10, send)).resolves.toBe('placed');
    expect(sent).toHaveLength(2);
  });

  it('forgets what no try took once the entry ended', async () => {
    const joins = new JoinsInFlight();
    const first = later<string>();
    await expect(joins.join('k', 't', 10, () => first.promise)).rejects.toBeInstanceOf(
      LockStoreUnavailableError,
    );
    const settled = joins.settled('k', 't');
    first.resolve('placed');
    await settled;
    expect(kept(joins)).toBe(0);
  });
});
