import { LockNotAcquiredError } from '../errors';
import type { AcquireAttemptOutcome, AcquireAttemptWon } from '../store/acquire-attempt';
import { LockChangeFeed } from './change-feed';
import { KeyQueue, MAX_LOCAL_HANDOVERS } from './key-queue';
import type { LockChangeStream } from '../store/lock-document';

/** A key held by someone else until `free()`; attempts are counted and may be slowed down. */
class FakeLock {
  held = true;
  /** Who holds it: someone else at first, this process once it won. */
  holder = 'other';
  attempts = 0;
  inFlight = 0;
  maxInFlight = 0;
  delayMs = 0;
  private seq = 0;

  attempt = async (): Promise<AcquireAttemptOutcome> => {
    this.attempts += 1;
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    const sentAt = performance.now();
    await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    this.inFlight -= 1;
    const base = { key: 'k', sentAt, operationTime: undefined };
    if (this.held) return { ...base, won: false, remainingMs: 60_000, holderId: this.holder };
    this.held = true;
    this.holder = 'me';
    this.seq += 1;
    return {
      ...base,
      won: true,
      remainingMs: 60_000,
      holderId: 'me',
      owner: `o${this.seq}`,
      fence: BigInt(this.seq),
    };
  };
}

const timing = { safetyPollIntervalMs: 600_000, pollIntervalMs: 10, maxPollIntervalMs: 20 };

function setUp() {
  const feed = new LockChangeFeed(
    () => {
      throw new Error('no streams in this test');
    },
    { warn: () => undefined, error: () => undefined },
    'off',
  );
  feed.watchEvents(() => undefined)(); // announce polling once, quietly
  const abandoned: AcquireAttemptWon[] = [];
  const queue = new KeyQueue('k', {
    feed,
    holderId: 'me',
    timing: { ...timing, pollIntervalMs: 600_000, maxPollIntervalMs: 600_000 },
    onEmpty: () => undefined,
  });
  const lock = new FakeLock();
  const request = (timeoutMs = 10_000, signal?: AbortSignal) => ({
    attempt: lock.attempt,
    withdraw: () => undefined,
    abandonWin: (won: AcquireAttemptWon) => void abandoned.push(won),
    deadline: performance.now() + timeoutMs,
    timeoutMs,
    signal,
  });
  /** The holder (in this process) releases: free the fake lock and tell the feed. */
  const release = () => {
    lock.held = false;
    feed.notifyHoldEnded('k', true);
  };
  return { queue, lock, request, release, abandoned };
}

const tick = (ms = 20) => new Promise((resolve) => setTimeout(resolve, ms));

describe('KeyQueue', () => {
  it('grants waiters in FIFO order and lets only the head attempt', async () => {
    const { queue, lock, request, release } = setUp();
    const order: number[] = [];
    const grants = [0, 1, 2].map((index) =>
      queue.enqueue(request()).then((won) => {
        order.push(index);
        return won;
      }),
    );
    await tick();
    expect(lock.attempts).toBe(1);
    for (let index = 0; index < 3; index += 1) {
      release();
      await tick();
    }
    await Promise.all(grants);
    expect(order).toEqual([0, 1, 2]);
    expect(lock.maxInFlight).toBe(1);
    // One failed attempt, then one per release: no polling in between.
    expect(lock.attempts).toBe(4);
  });

  it('hands over to the next local waiter without an attempt until the winner releases', async () => {
    const { queue, lock, request, release } = setUp();
    lock.held = false;
    const first = queue.enqueue(request());
    const second = queue.enqueue(request());
    await first;
    await tick();
    expect(lock.attempts).toBe(1);
    release();
    await expect(second).resolves.toMatchObject({ won: true });
    expect(lock.attempts).toBe(2);
  });

  it("rejects a waiter at its deadline with the holder's remaining lease", async () => {
    const { queue, request } = setUp();
    const error = await queue.enqueue(request(50)).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    expect(error).toMatchObject({ keys: ['k'], holderId: 'other' });
    expect((error as LockNotAcquiredError).retryAfterMs).toBeGreaterThan(59_000);
    expect(queue.size).toBe(0);
  });

  it('removes an aborted waiter behind the head, and the rest still get their turn', async () => {
    const { queue, request, release } = setUp();
    const controller = new AbortController();
    const head = queue.enqueue(request());
    const cancelled = queue.enqueue(request(10_000, controller.signal));
    const last = queue.enqueue(request());
    await tick();
    controller.abort(new Error('stop'));
    await expect(cancelled).rejects.toThrow('stop');
    expect(queue.size).toBe(2);
    release();
    await head;
    release();
    await expect(last).resolves.toMatchObject({ won: true });
  });

  it('gives back a lock won by a waiter that left while its attempt was in flight', async () => {
    const { queue, lock, request, abandoned } = setUp();
    lock.held = false;
    lock.delayMs = 50;
    const controller = new AbortController();
    const leaving = queue.enqueue(request(10_000, controller.signal));
    await tick(10);
    controller.abort(new Error('gone'));
    await expect(leaving).rejects.toThrow('gone');
    await tick(80);
    expect(abandoned).toHaveLength(1);
    expect(abandoned[0]).toMatchObject({ won: true, key: 'k' });
  });

  describe('with a change stream', () => {
    /** A stream the test feeds release events into. */
    function streamingSetUp() {
      const pushed: unknown[] = [];
      let wake: (() => void) | undefined;
      const stream = {
        closed: false,
        resumeToken: undefined,
        tryNext: async () => {
          if (pushed.length === 0) {
            await new Promise<void>((resolve) => {
              wake = resolve;
              setTimeout(resolve, 5);
            });
          }
          return pushed.shift() ?? null;
        },
        close: async () => undefined,
      };
      const feed = new LockChangeFeed(
        () => stream as unknown as LockChangeStream,
        { warn: () => undefined, error: () => undefined },
        'auto',
      );
      const lock = new FakeLock();
      lock.held = false;
      const queue = new KeyQueue('k', {
        feed,
        holderId: 'me',
        timing,
        onEmpty: () => undefined,
      });
      const request = () => ({
        attempt: lock.attempt,
        withdraw: () => undefined,
        abandonWin: () => undefined,
        deadline: performance.now() + 10_000,
        timeoutMs: 10_000,
        signal: undefined,
      });
      const streamRelease = () => {
        pushed.push({
          operationType: 'update',
          documentKey: { _id: 'k' },
          updateDescription: { updatedFields: { owner: null } },
        });
        wake?.();
      };
      return { feed, lock, queue, request, streamRelease };
    }

    it('leaves every fifth local hand-over to the stream, and does not stall when the event came first', async () => {
      const { feed, lock, queue, request, streamRelease } = streamingSetUp();
      const count = 2 * MAX_LOCAL_HANDOVERS + 3;
      const waiters = Array.from({ length: count }, () => queue.enqueue(request()));
      await waiters[0];
      await tick(30); // the stream is established (and its recheck heard) before we count
      for (let handover = 1; handover <= MAX_LOCAL_HANDOVERS; handover += 1) {
        lock.held = false;
        feed.notifyHoldEnded('k', true);
        await waiters[handover];
      }
      // The fifth: the local release alone does not wake the next waiter...
      const attemptsBefore = lock.attempts;
      lock.held = false;
      feed.notifyHoldEnded('k', true);
      await tick(50);
      expect(lock.attempts).toBe(attemptsBefore);
      // ...the stream's event of it does.
      streamRelease();
      await waiters[MAX_LOCAL_HANDOVERS + 1];
      let next = MAX_LOCAL_HANDOVERS + 2;
      for (let handover = 1; handover <= MAX_LOCAL_HANDOVERS; handover += 1) {
        lock.held = false;
        feed.notifyHoldEnded('k', true);
        await waiters[next++];
      }
      // Again the fifth, but its stream event overtakes the local notice: no stall.
      lock.held = false;
      streamRelease();
      await tick(20);
      feed.notifyHoldEnded('k', true);
      await waiters[next];
      await feed.close();
    });
  });
});
