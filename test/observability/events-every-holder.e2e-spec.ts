// docs/observability.md: "events$ reports every change made after you subscribe", and "when a
// release lets others hold, their acquired events follow it". An exclusive lock's leave was read
// from the document looked up when the event was read, not from the leave's own delta (which
// carries the whole line as written): a holder that the leave made and that left again before
// that lookup (a short hold) was never reported, and the holder after it was reported twice.
// The watcher's reads are held back here, as a busy event loop or a slow network would.
import type { Subscription } from 'rxjs';
import type { LockEvent } from '../../lib';
import { faultTools } from '../lock-service/adversarial/kit';
import { eventually, LockTestKit, sleep } from '../lock-service/lock-test-kit';

jest.setTimeout(30_000);

describe('events$ for an exclusive lock handed from holder to holder', () => {
  const kit = LockTestKit.forSuite();
  const { failPoint, failPointFired, appClient } = faultTools(kit);
  let subscription: Subscription | undefined;
  afterEach(() => subscription?.unsubscribe());

  it('reports every holder, each once, even one that left before the events were read', async () => {
    // A long key: MongoDB streams each write as an update with its delta.
    const key = `orders:${'8'.repeat(300)}`;
    const watcher = await kit.service({ client: await appClient('events-watcher') });
    const [a, b, c] = await Promise.all(
      ['A', 'B', 'C'].map((holderId) => kit.service({ holderId, localHandOff: false })),
    );
    const events: string[] = [];
    subscription = watcher.events$.subscribe((event: LockEvent) => {
      if (event.key === key) events.push(`${event.type} ${event.holderId ?? '-'}`);
    });
    await eventually(() => watcher.diagnostics.eventsFlowing);
    const held = await a.acquire(key, { ttlMs: 30_000 });
    await eventually(() => events.length === 1);
    const waitingB = b.acquire(key, { timeoutMs: 10_000 });
    await sleep(200);
    const waitingC = c.acquire(key, { timeoutMs: 10_000 });
    await sleep(200);
    // The watcher's next read waits 2 s; the one under way ends with the next change.
    const fired = await failPoint(
      { times: 1 },
      {
        failCommands: ['getMore'],
        appName: 'events-watcher',
        blockConnection: true,
        blockTimeMS: 2_000,
      },
    );
    const other = await a.acquire('elsewhere');
    await other.release();
    await failPointFired(fired + 1);
    // Meanwhile A hands the key to B, B (a short hold) to C.
    await held.release();
    await (await waitingB).release();
    const heldByC = await waitingC;
    await eventually(() => events.length >= 5, 10_000);
    await sleep(300);
    expect(events).toEqual(['acquired A', 'released -', 'acquired B', 'released -', 'acquired C']);
    await heldByC.release();
  });
});
