import { LockStoreUnavailableError } from '../../errors/lock-store-unavailable.error';
import { RenewalsInFlight } from './renewals-in-flight';

function later<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((settle) => (resolve = settle));
  return { promise, resolve };
}

const renewal = { key: 'k', token: 't', ttlMs: 1_000, exactly: false };

describe('RenewalsInFlight', () => {
  it('sends a copy once while the first is unanswered, and a try takes the first reply, with its send time', async () => {
    const renewals = new RenewalsInFlight();
    const first = later<{ renewed: boolean }>();
    const sent: number[] = [];
    const send = () => {
      sent.push(performance.now());
      return sent.length === 1 ? first.promise : new Promise<{ renewed: boolean }>(() => undefined);
    };
    for (let i = 0; i < 3; i++) {
      await expect(renewals.renew(renewal, 10, send)).rejects.toBeInstanceOf(
        LockStoreUnavailableError,
      );
    }
    expect(sent).toHaveLength(2);
    // The fourth try sends nothing: the first copy answers it, timed from its own send.
    const fourth = renewals.renew(renewal, 1_000, send);
    first.resolve({ renewed: true });
    const reply = await fourth;
    expect(reply).toEqual({ renewed: true, sentAt: expect.any(Number) as number });
    expect(reply.sentAt).toBeLessThanOrEqual(sent[0]);
    expect(sent).toHaveLength(2);
  });

  it('keeps nothing once answered: the next renewal is sent afresh, timed from then', async () => {
    const renewals = new RenewalsInFlight();
    let sends = 0;
    const send = () => Promise.resolve({ renewed: true, n: ++sends });
    const a = await renewals.renew(renewal, 1_000, send);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const b = await renewals.renew(renewal, 1_000, send);
    expect([a.n, b.n]).toEqual([1, 2]);
    expect(b.sentAt).toBeGreaterThan(a.sentAt);
    expect((renewals as unknown as { unanswered: Map<string, unknown> }).unanswered.size).toBe(0);
  });

  it('never answers a renewal with a copy asking another lease', async () => {
    const renewals = new RenewalsInFlight();
    const asked: number[] = [];
    const send = (ttlMs: number) => () => {
      asked.push(ttlMs);
      return new Promise<object>(() => undefined);
    };
    for (const ttlMs of [1_000, 1_000, 2_000]) {
      await expect(renewals.renew({ ...renewal, ttlMs }, 10, send(ttlMs))).rejects.toBeInstanceOf(
        LockStoreUnavailableError,
      );
    }
    await expect(
      renewals.renew({ ...renewal, exactly: true }, 10, send(-1)),
    ).rejects.toBeInstanceOf(LockStoreUnavailableError);
    expect(asked).toEqual([1_000, 1_000, 2_000, -1]);
  });

  it('passes a refusal on, and a failed copy is sent again', async () => {
    const renewals = new RenewalsInFlight();
    let sends = 0;
    const refuse = () => {
      sends++;
      return Promise.reject(new Error('not a lock field'));
    };
    await expect(renewals.renew(renewal, 1_000, refuse)).rejects.toThrow('not a lock field');
    await expect(renewals.renew(renewal, 1_000, refuse)).rejects.toThrow('not a lock field');
    expect(sends).toBe(2);
  });
});
