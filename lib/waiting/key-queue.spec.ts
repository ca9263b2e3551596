import { Timestamp } from 'mongodb';
import { LockNotAcquiredError, LockStoreUnavailableError } from '../errors';
import { GRANT_LEASE_MS, grantToken } from '../store/direct-grant';
import type { AcquireAttemptOutcome, AcquireAttemptWon } from '../store/acquire-attempt';
import type { ReservationUse } from '../store/lock-modes';
import { LockChangeFeed } from './change-feed';
import { KeyQueue } from './key-queue';
import { readLockChange } from './lock-event';
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
  /** The store's reservation of this process after a lost attempt (its place in line), if any. */
  reservedMs: number | undefined;
  /** Whether each attempt was sent to confirm a grant heard before it. */
  confirming: boolean[] = [];
  /** What each attempt was sent with. */
  uses: (ReservationUse | undefined)[] = [];
  /** The queue's reservation, as its attempts name it. */
  reservation: string | undefined;
  /** The server time of each reply, when set (`Timestamp` seconds). */
  operationTime: number | undefined;
  /** How long before its reply each attempt counts as sent (an old attempt). */
  ageMs = 0;
  lastSentAt: number | undefined;
  /** Lost attempts report a pending grant to this reservation, when set. */
  grantPendingTo: string | undefined;
  /** The next attempts fail without a reply (MongoDB unavailable). */
  failures = 0;
  /** Places kept by the small write; what it answers (the place's lease, or gone). */
  keeps = 0;
  keptMs: number | undefined;
  /** The small write answers after this long; with `keepFails`, with no reply (a timeout). */
  keepDelayMs = 0;
  keepFails = false;
  private seq = 0;

  keepPlace = async (): Promise<number | undefined> => {
    this.keeps += 1;
    await new Promise((resolve) => setTimeout(resolve, this.keepDelayMs));
    if (this.keepFails) throw new LockStoreUnavailableError('no reply');
    return this.keptMs;
  };

  attempt = async (
    _key?: string,
    reservation?: string,
    use?: ReservationUse,
  ): Promise<AcquireAttemptOutcome> => {
    this.attempts += 1;
    this.confirming.push(use?.confirmsGrant ?? false);
    this.uses.push(use);
    this.reservation = reservation;
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    const sentAt = performance.now() - this.ageMs;
    this.lastSentAt = sentAt;
    await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    this.inFlight -= 1;
    if (this.failures > 0) {
      this.failures -= 1;
      throw new LockStoreUnavailableError('no reply');
    }
    const operationTime = this.operationTime === undefined ? undefined : ts(this.operationTime);
    const base = { key: 'k', sentAt, operationTime };
    const reserved = this.reservedMs === undefined ? {} : { reservedMs: this.reservedMs };
    if (this.held) {
      const pending =
        this.grantPendingTo === undefined ? {} : { grantPendingTo: this.grantPendingTo };
      return {
        ...base,
        won: false,
        remainingMs: 60_000,
        holderId: this.holder,
        ...reserved,
        ...pending,
      };
    }
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
      ...reserved,
    };
  };
}

const ts = (seconds: number) => new Timestamp({ t: seconds, i: 1 });

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
    localRun: { current: () => undefined, add: () => undefined, reset: () => undefined },
  });
  const lock = new FakeLock();
  const request = (timeoutMs = 10_000, signal?: AbortSignal) => ({
    attempts: {
      attempt: lock.attempt,
      withdraw: () => undefined,
      keepPlace: lock.keepPlace,
      abandonWin: (won: AcquireAttemptWon) => void abandoned.push(won),
    },
    deadline: performance.now() + timeoutMs,
    timeoutMs,
    signal,
  });
  /** The holder (in this process) releases: free the fake lock and tell the feed. */
  const release = () => {
    lock.held = false;
    feed.notifyHoldEnded('k', 'freed');
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

  it('sends the small plain command first only on its first attempt, with nothing known of the key', async () => {
    const { queue, lock, request, release } = setUp();
    const first = queue.enqueue(request());
    await tick();
    const plainFirst = () => lock.uses.map((use) => use?.plainFirst === true);
    expect(plainFirst()).toEqual([true]);
    const second = queue.enqueue(request());
    // After a lost attempt the key is known to be in use: the full attempt, at once.
    release();
    const won = await first;
    expect(won.won).toBe(true);
    expect(plainFirst()).toEqual([true, false]);
    release();
    await second;
    expect(plainFirst()).toEqual([true, false, false]);
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
        10_000,
        readLockChange('me'),
      );
      const lock = new FakeLock();
      lock.held = false;
      const queue = new KeyQueue('k', {
        feed,
        holderId: 'me',
        timing,
        onEmpty: () => undefined,
        localRun: { current: () => undefined, add: () => undefined, reset: () => undefined },
      });
      const withdrawals: (string | undefined)[] = [];
      const request = (transfer?: { scope: string | null }, signal?: AbortSignal) => ({
        attempts: {
          attempt: lock.attempt,
          withdraw: (_key: string, _reservation: string, exceptGrant?: string) =>
            void withdrawals.push(exceptGrant),
          keepPlace: lock.keepPlace,
          abandonWin: () => undefined,
        },
        deadline: performance.now() + 10_000,
        timeoutMs: 10_000,
        signal,
        ...(transfer
          ? {
              transfer: { owner: 'caller', ttlMs: 30_000, uncertain: () => undefined, ...transfer },
            }
          : {}),
      });
      const streamRelease = (at?: number) => push({ owner: null }, at);
      /** A release that hands the key to process `grantee` (see `direct-grant.ts`). */
      const streamGrant = (grantee: string, fence = 7) =>
        push({ owner: 'grant:r', holder: grantee, grantee, fence, releasedFence: fence - 1 });
      /** A release that grants the key to this queue's reservation (or another), as streamed. */
      const streamOurGrant = (fence: number, at: number, grantedTo = lock.reservation!) => {
        const owner = grantToken(grantedTo, BigInt(fence));
        push(
          { owner, holder: 'me', grantee: 'me', grantedTo, fence, releasedFence: fence - 1 },
          at,
        );
      };
      const push = (updatedFields: Record<string, unknown>, at?: number) => {
        pushed.push({
          operationType: 'update',
          documentKey: { _id: 'k' },
          updateDescription: { updatedFields },
          ...(at === undefined ? {} : { clusterTime: ts(at) }),
        });
        wake?.();
      };
      return {
        feed,
        lock,
        queue,
        request,
        streamRelease,
        streamGrant,
        streamOurGrant,
        withdrawals,
      };
    }

    it('waits for its own grant when a local release hands the key to another process', async () => {
      const { feed, lock, queue, request, streamGrant } = streamingSetUp();
      lock.reservedMs = 10_000; // the process keeps its place in line (more callers wait)
      const first = queue.enqueue(request());
      const second = queue.enqueue(request());
      await first;
      await tick(30); // the stream is established (and its recheck heard) before we count
      const attemptsBefore = lock.attempts;
      // Our release went to another process: nobody here tries...
      lock.held = true;
      lock.holder = 'other';
      feed.notifyHoldEnded('k', 'granted-elsewhere');
      streamGrant('other'); // ...nor on the stream's news of that grant.
      await tick(50);
      expect(lock.attempts).toBe(attemptsBefore);
      // The grant to this process wakes the head, which takes it.
      lock.held = false;
      streamGrant('me');
      await second;
      expect(lock.attempts).toBe(attemptsBefore + 1);
      await feed.close();
    });

    it('a parked queue keeps its place by the small write, not by attempts', async () => {
      const { feed, lock, queue, request, streamRelease } = streamingSetUp();
      lock.held = true; // by another process
      // A place with 3.4 s left is renewed 3.33 s before its end: at once, and after each keep.
      lock.reservedMs = 3_400;
      lock.keptMs = 3_400;
      const waiting = queue.enqueue(request());
      await tick(150); // the stream's start wakes the queue once: an attempt
      const attempts = lock.attempts;
      const keeps = lock.keeps;
      await tick(300);
      expect(lock.attempts).toBe(attempts);
      expect(lock.keeps).toBeGreaterThanOrEqual(keeps + 2);
      lock.held = false;
      streamRelease();
      await waiting;
      expect(lock.attempts).toBe(attempts + 1);
      await feed.close();
    });

    it('a renewal of the place that got no reply is withdrawn when the queue empties: it may have landed', async () => {
      const { feed, lock, queue, request, withdrawals } = streamingSetUp();
      lock.held = true;
      // The place ends 40 ms from now as this queue counts it: renewed at once, and the
      // renewal fails (at 150 ms) after that end.
      lock.reservedMs = 3_340;
      lock.ageMs = 3_300;
      lock.keepDelayMs = 150;
      lock.keepFails = true;
      const waiting = queue.enqueue({ ...request(), deadline: performance.now() + 100 });
      await expect(waiting).rejects.toThrow();
      await tick(200);
      expect(lock.keeps).toBe(1);
      expect(withdrawals).toHaveLength(1);
      await feed.close();
    });

    it('a place the key no longer keeps is taken again by an attempt', async () => {
      const { feed, lock, queue, request } = streamingSetUp();
      lock.held = true; // by another process
      lock.reservedMs = 3_400;
      lock.keptMs = undefined; // the small write found no live place of ours
      const waiting = queue.enqueue(request());
      await tick(100);
      expect(lock.keeps).toBeGreaterThanOrEqual(1);
      expect(lock.attempts).toBeGreaterThanOrEqual(2);
      lock.held = false;
      await waiting;
      await feed.close();
    });

    it('without a place in line, the head tries when a local release went to another process', async () => {
      const { feed, lock, queue, request } = streamingSetUp();
      const first = queue.enqueue(request());
      const second = queue.enqueue(request());
      await first;
      await tick(30);
      lock.held = false; // as if the other process had been quick: the head takes its place
      feed.notifyHoldEnded('k', 'granted-elsewhere');
      await second;
      await feed.close();
    });

    it('a grant to this process wakes its head even while it believes it holds the key', async () => {
      const { feed, lock, queue, request, streamGrant } = streamingSetUp();
      const first = queue.enqueue(request());
      const second = queue.enqueue(request());
      await first; // fence 1: held here, as far as this queue knows
      await tick(30);
      const attemptsBefore = lock.attempts;
      streamGrant('me', 1); // the news of the grant it holds by: old, ignored
      await tick(50);
      expect(lock.attempts).toBe(attemptsBefore);
      // A newer grant: the hold ended without this queue hearing of it. The head takes it.
      lock.held = false;
      streamGrant('me', 9);
      await second;
      expect(lock.attempts).toBe(attemptsBefore + 1);
      await feed.close();
    });

    it('a grant heard makes the next attempt a confirmation, unless an attempt on its way took it', async () => {
      const { feed, lock, queue, request, streamRelease } = streamingSetUp();
      lock.held = true; // another process holds the key
      const first = queue.enqueue(request());
      const second = queue.enqueue(request());
      await tick(30); // the first attempt lost; the queue watches the key
      const before = lock.attempts;
      lock.delayMs = 40;
      lock.held = false;
      streamRelease();
      await tick(15); // the head's attempt is on its way...
      feed.notifyHoldEnded('k', 'granted-here'); // ...when a grant to this process is heard
      await first; // that attempt took it
      await tick(30);
      lock.held = false;
      feed.notifyHoldEnded('k', 'freed');
      await second;
      // The grant was the winning attempt's: the next one is no confirmation.
      expect(lock.confirming.slice(before)).toEqual([false, false]);

      const third = queue.enqueue(request()); // waits for the second's release
      await tick(60);
      lock.held = false;
      feed.notifyHoldEnded('k', 'granted-here');
      await third;
      expect(lock.confirming.slice(before)).toEqual([false, false, true]);
      await feed.close();
    });

    it("a local grant's news is old to a queue that already took that grant", async () => {
      const { feed, lock, queue, request } = streamingSetUp();
      const first = queue.enqueue(request());
      const second = queue.enqueue(request());
      await first; // fence 1: held here
      await tick(30);
      const before = lock.attempts;
      // Our release granted the key here (its fence at least 1), and the head took it already.
      feed.notifyHoldEnded('k', 'granted-here', 1n);
      await tick(50);
      expect(lock.attempts).toBe(before);
      // A grant past our hold: the head takes it, by the confirming command.
      lock.held = false;
      feed.notifyHoldEnded('k', 'granted-here', 2n);
      await second;
      expect(lock.confirming.slice(before)).toEqual([true]);
      await feed.close();
    });

    it('lets the head try at once when a local release freed the key', async () => {
      const { feed, lock, queue, request } = streamingSetUp();
      const first = queue.enqueue(request());
      const second = queue.enqueue(request());
      await first;
      await tick(30);
      lock.held = false;
      feed.notifyHoldEnded('k', 'freed');
      await second;
      await feed.close();
    });

    describe('a grant heard on the stream, handed to the head without a write', () => {
      /** The key is held elsewhere; the head's attempt lost at server time 10; the queue watches. */
      async function waitingHead(transfer: { scope: string | null } | null = { scope: null }) {
        const setUp = streamingSetUp();
        setUp.lock.held = true;
        setUp.lock.operationTime = 10;
        const waits = setUp.queue.enqueue(setUp.request(transfer ?? undefined));
        await tick(30);
        return { ...setUp, waits };
      }

      it("the head holds the lock at once under the grant's token, its lease counted from its last attempt", async () => {
        const { feed, lock, waits, streamOurGrant } = await waitingHead();
        const attempts = lock.attempts;
        streamOurGrant(40, 11);
        const won = await waits;
        expect(lock.attempts).toBe(attempts);
        expect(won).toMatchObject({
          won: true,
          owner: grantToken(lock.reservation!, 40n),
          fence: 40n,
          holderId: 'me',
          sentAt: lock.lastSentAt,
          remainingMs: GRANT_LEASE_MS,
          grantUnconfirmed: true,
        });
        await feed.close();
      });

      /** The grant is not handed out: the next attempt takes it by the confirming command. */
      async function takenByConfirmation(setUp: Awaited<ReturnType<typeof waitingHead>>) {
        const { feed, lock, waits } = setUp;
        const won = await waits;
        expect(won.grantUnconfirmed).toBeUndefined();
        expect(lock.confirming.at(-1)).toBe(true);
        await feed.close();
      }

      it('not on news no newer than its last attempt: that attempt may have seen the grant', async () => {
        const setUp = await waitingHead();
        const { lock, streamRelease, streamOurGrant } = setUp;
        lock.operationTime = 20;
        streamRelease(11); // the head tries again and loses, at server time 20
        await tick(30);
        lock.held = false;
        streamOurGrant(40, 15); // newer than the watch's start, older than the last attempt
        await takenByConfirmation(setUp);
      });

      it('not when its last attempt is older than half a grant lease', async () => {
        const setUp = await waitingHead();
        setUp.lock.ageMs = GRANT_LEASE_MS / 2 + 100;
        setUp.streamRelease(11);
        await tick(30);
        setUp.lock.held = false;
        setUp.streamOurGrant(40, 12);
        await takenByConfirmation(setUp);
      });

      it('not to a scoped head, nor to one a release may not pass the lock to', async () => {
        for (const transfer of [{ scope: 'tenant-1' }, null]) {
          const setUp = await waitingHead(transfer);
          setUp.lock.held = false;
          setUp.streamOurGrant(40, 11);
          await takenByConfirmation(setUp);
        }
      });

      it("not a grant to another reservation (an earlier queue's)", async () => {
        const setUp = await waitingHead();
        setUp.lock.held = false;
        setUp.streamOurGrant(40, 11, 'rolder');
        await takenByConfirmation(setUp);
      });

      it('not while an attempt is on its way: that attempt may take it', async () => {
        const { feed, lock, waits, streamRelease, streamOurGrant } = await waitingHead();
        lock.delayMs = 40;
        lock.held = false;
        streamRelease(11);
        await tick(15); // the head's attempt is on its way
        streamOurGrant(40, 12);
        const won = await waits;
        expect(won.owner).toBe('o1'); // the attempt's own win
        expect(won.grantUnconfirmed).toBeUndefined();
        await feed.close();
      });

      it('not while an attempt for a caller that left is on its way: that attempt may take it', async () => {
        const { feed, lock, queue, request, streamRelease, streamOurGrant } = streamingSetUp();
        lock.held = true;
        lock.operationTime = 10;
        const leaving = new AbortController();
        const first = queue.enqueue(request({ scope: null }, leaving.signal)).catch(() => null);
        const second = queue.enqueue(request({ scope: null }));
        await tick(30);
        lock.delayMs = 60;
        streamRelease(11); // the first caller's attempt goes out...
        await tick(15);
        leaving.abort(); // ...and its caller leaves: the second is the head now
        streamOurGrant(40, 12);
        await tick(60); // that attempt lost
        lock.held = false;
        const won = await second;
        expect(won.grantUnconfirmed).toBeUndefined();
        expect(await first).toBeNull();
        await feed.close();
      });

      it('not while a local release is passing the lock to the head', async () => {
        const setUp = await waitingHead();
        const offered = setUp.queue.takeSuccessor();
        expect(offered).toBeDefined();
        setUp.streamOurGrant(40, 11);
        await tick(20);
        setUp.lock.held = false;
        offered!.declined(); // the release then tells how the hold ended
        setUp.feed.notifyHoldEnded('k', 'granted-elsewhere');
        await takenByConfirmation(setUp);
      });

      it('not after an attempt of the queue got no reply: it may still land and take it', async () => {
        const setUp = await waitingHead();
        setUp.lock.failures = 1;
        setUp.streamRelease(11); // that attempt fails; the next one, after a short poll, loses
        await tick(60);
        setUp.lock.held = false;
        setUp.streamOurGrant(40, 12);
        await takenByConfirmation(setUp);
      });

      it('the handed-out grant, still pending, counts as held here: stale releases wake nobody', async () => {
        const { feed, lock, queue, request, streamRelease, streamOurGrant } = streamingSetUp();
        lock.held = true;
        lock.operationTime = 10;
        lock.reservedMs = 3_400; // refreshed about 70 ms after each attempt
        const first = queue.enqueue(request({ scope: null }));
        const second = queue.enqueue(request({ scope: null }));
        await tick(30);
        streamOurGrant(40, 11);
        await first;
        // The next waiter's refresh finds our handed-out grant, not confirmed yet.
        lock.holder = 'me';
        lock.grantPendingTo = lock.reservation;
        lock.reservedMs = undefined;
        await tick(150);
        const attempts = lock.attempts;
        expect(lock.uses.at(-1)?.exceptGrant).toBeDefined();
        streamRelease(22); // stale: this process holds the key
        await tick(30);
        expect(lock.attempts).toBe(attempts);
        lock.held = false;
        lock.grantPendingTo = undefined;
        feed.notifyHoldEnded('k', 'freed');
        await second;
        await feed.close();
      });

      it('later attempts and the withdrawal leave the handed-out grant alone', async () => {
        const { feed, lock, queue, request, waits, streamOurGrant, withdrawals } =
          await waitingHead();
        lock.reservedMs = 10_000; // our place in line is kept
        const second = queue.enqueue(request({ scope: null }));
        streamOurGrant(40, 11);
        const first = await waits;
        lock.held = false;
        feed.notifyHoldEnded('k', 'freed'); // the first caller released
        await second;
        expect(lock.uses.at(-1)?.exceptGrant).toBe(first.owner);
        await tick(10);
        expect(withdrawals).toEqual([first.owner]);
        await feed.close();
      });
    });
  });
});
