// events$ for an exclusive lock: a waiter that gives up leaves the line without changing who
// holds, and is no event; the holder's own release is one, with the next holder's acquisition.
// A long key, so that MongoDB streams each write as an update with its delta (a short key's
// small document is streamed whole, as a replacement, which is read as docs/observability.md says).
import type { Subscription } from 'rxjs';
import type { LockEvent } from '../../lib';
import { eventually, LockTestKit, sleep } from '../lock-service/lock-test-kit';

jest.setTimeout(30_000);

describe('events$ when a waiter of an exclusive lock gives up', () => {
  const kit = LockTestKit.forSuite();
  let subscription: Subscription | undefined;
  afterEach(() => subscription?.unsubscribe());

  it('reports nothing, and the release after it as released then acquired', async () => {
    const key = `orders:${'7'.repeat(300)}`;
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const events: string[] = [];
    subscription = a.events$.subscribe((event: LockEvent) =>
      events.push(`${event.type} ${event.holderId ?? '-'}`),
    );
    await eventually(() => a.diagnostics.eventsFlowing);
    const held = await a.acquire(key, { ttlMs: 30_000 });
    await eventually(() => events.length === 1);
    // Two waiters give up in turn: A holds all along.
    for (const timeoutMs of [300, 200]) {
      await expect(b.acquire(key, { timeoutMs })).rejects.toThrow(/not acquired/);
    }
    await sleep(500);
    expect(events).toEqual(['acquired A']);
    const next = b.acquire(key, { timeoutMs: 5_000 });
    await sleep(200);
    await held.release();
    await (await next).release();
    await eventually(() => events.length >= 3);
    expect(events.slice(0, 3)).toEqual(['acquired A', 'released -', 'acquired B']);
  });
});
