import { randomBytes } from 'node:crypto';
import { LockNotAcquiredError } from './errors/lock-not-acquired.error';
import { localLeaseEnd } from './lease-keeper';
import { MongoLockHandle } from './lock-handle';
import { notAcquiredMessage } from './lock.messages';
import type { JoinRequest, LineCollection } from './store/line/line-commands';
import type { ReleaseLeaseOutcome } from './store/release-lease';
import { checkJoin, joinLine, leaveLine, renewInLine } from './store/line/line-commands';
import type { LineKind, LinePlace } from './store/line/line-document';
import { setTimeout } from 'node:timers';
import { sleep } from './util/timers';
import type { LineWaiters } from './waiting/line-waiters';

/**
 * Engine v2's acquisition of one key (ownership by position): join the key's line in one
 * write; hold at once if the reply says so, else wait until a change event or a release here
 * says the entry now holds. A lease ahead that runs out by itself is confirmed by renewing our
 * own entry (the renewal drops dead entries and says where we stand), which also keeps a
 * waiting entry alive. Not yet under `LockService`: the bench drives it directly.
 */

export interface LineAcquireRequest {
  key: string;
  kind: LineKind;
  ttlMs: number;
  /** 0: only if free now (`tryAcquire`). */
  timeoutMs: number;
  signal?: AbortSignal;
  scope?: string;
}

/** A key held by position in its line. */
export interface LineHold {
  key: string;
  /** The entry's token: its release and renewals go by it. */
  token: string;
  fence: bigint;
  /** Local monotonic deadline of the lease, as of the last write that set it. */
  leaseEnd: number;
}

/** How a handle keeps its lease (see `LeaseKeeperInit`). */
export interface LineLeaseOptions {
  ttlMs: number;
  renew: boolean;
  renewalIntervalRatio: number;
  maxHoldMs: number;
}

export interface LineAcquirerDeps {
  collection: LineCollection;
  waiters: LineWaiters;
  holderId: string;
  idleRetentionMs: number;
}

/**
 * Settles at monotonic time `until` ('timer') or when `signal` aborts ('aborted'), whichever
 * comes first; `dispose` clears the timer and the listener.
 */
function callEnd(until: number, signal: AbortSignal | undefined) {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const ended = new Promise<'timer' | 'aborted'>((resolve) => {
    if (signal?.aborted) return resolve('aborted');
    timer = setTimeout(() => resolve('timer'), Math.max(0, until - performance.now()));
    onAbort = () => resolve('aborted');
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  const dispose = () => {
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener('abort', onAbort);
  };
  return { ended, dispose };
}

/** Waits until `heard` resolves, monotonic time `until`, or `signal` aborts. */
async function wakeUp(
  heard: Promise<void>,
  until: number,
  signal: AbortSignal | undefined,
): Promise<'heard' | 'timer' | 'aborted'> {
  const end = callEnd(until, signal);
  try {
    return await Promise.race([heard.then(() => 'heard' as const), end.ended]);
  } finally {
    end.dispose();
  }
}

/** `write`, or the call's end first: its deadline (LockNotAcquiredError) or its abort. */
async function withinCall<T>(
  write: Promise<T>,
  deadline: number,
  request: LineAcquireRequest,
): Promise<T> {
  write.catch(() => undefined);
  const end = callEnd(deadline, request.signal);
  try {
    const first = await Promise.race([write.then((value) => ({ value })), end.ended]);
    if (first === 'timer') throw notAcquired(request);
    if (first === 'aborted') throw request.signal?.reason;
    return first.value;
  } finally {
    end.dispose();
  }
}

/** 96 random bits, short on the wire: every command carries it. */
function newToken(): string {
  return randomBytes(12).toString('base64url');
}

function notAcquired(
  request: LineAcquireRequest,
  holderId?: string,
  retryAfterMs?: number,
): LockNotAcquiredError {
  return new LockNotAcquiredError(
    notAcquiredMessage([request.key], request.timeoutMs, holderId, retryAfterMs),
    { keys: [request.key], holderId, retryAfterMs },
  );
}

export class LineAcquirer {
  constructor(private readonly deps: LineAcquirerDeps) {}

  async acquire(request: LineAcquireRequest): Promise<LineHold> {
    const { key, ttlMs } = request;
    const deadline = performance.now() + request.timeoutMs;
    // Every join has a token of its own: news about an entry that ended never reaches the
    // entry that replaced it.
    let token = newToken();
    // Whether the line may hold an entry of ours: a write with no reply may have made one.
    let entry: 'none' | 'joined' | 'unknown' = 'none';
    // Listening before the join: the event that makes us holder may come before its reply.
    let waiting = this.deps.waiters.wait(key, token);
    const join = async () => {
      const joinRequest = this.joinRequest(request, token);
      checkJoin(joinRequest);
      entry = 'unknown';
      const joined = await joinLine(this.deps.collection, joinRequest);
      entry = joined.joined ? 'joined' : 'none';
      if (!joined.joined) throw notAcquired(request, joined.holderId, joined.retryAfterMs);
      return joined;
    };
    // A wait gives up at its deadline or abort, even with a write on its way.
    const bounded = <T>(write: Promise<T>) =>
      request.timeoutMs === 0 ? write : withinCall(write, deadline, request);
    try {
      let sentAt = performance.now();
      let place: LinePlace = await bounded(join());
      for (;;) {
        const leaseEnd = localLeaseEnd(sentAt, place.remainingMs, ttlMs);
        if (place.holds) return { key, token, fence: place.fence, leaseEnd };
        // A waiting entry is renewed at a third of its lease, as a holder's is.
        const renewAt = sentAt + Math.min(place.aheadEndsInMs, ttlMs / 3);
        const woke = await wakeUp(waiting.heard, Math.min(renewAt, deadline), request.signal);
        if (woke === 'aborted') throw request.signal?.reason;
        // Heard to hold: from then on, until our entry's own lease ends.
        if (woke === 'heard' && leaseEnd - performance.now() > ttlMs / 3) {
          return { key, token, fence: place.fence, leaseEnd };
        }
        if (woke === 'timer' && performance.now() >= deadline) throw notAcquired(request);
        sentAt = performance.now();
        const renewal = renewInLine(
          this.deps.collection,
          key,
          token,
          ttlMs,
          this.deps.idleRetentionMs,
        );
        entry = 'unknown';
        const renewed = await bounded(renewal);
        entry = 'joined';
        if (renewed.renewed) {
          place = renewed;
        } else {
          // Our entry ran out (a long stall; the renewal dropped it): join again, at the back.
          waiting.stop();
          token = newToken();
          waiting = this.deps.waiters.wait(key, token);
          place = await bounded(join());
        }
      }
    } catch (error) {
      // Any write of ours was sent before now, so our entry, if any, ends within ttlMs.
      if (entry !== 'none') this.leaveInBackground(key, token, performance.now() + ttlMs, entry);
      throw error;
    } finally {
      waiting.stop();
    }
  }

  /**
   * A {@link MongoLockHandle} for a hold: its lease keeper renews our entry and tells of a
   * loss at the local deadline, its release leaves the line.
   */
  handleFor(hold: LineHold, lease: LineLeaseOptions): MongoLockHandle {
    const leave = async (): Promise<ReleaseLeaseOutcome> =>
      (await this.release(hold)) ? 'released' : 'lost';
    return new MongoLockHandle({
      held: [{ key: hold.key, owner: hold.token, fence: hold.fence }],
      leaseEnd: hold.leaseEnd,
      ttlMs: lease.ttlMs,
      renew: lease.renew,
      renewalIntervalRatio: lease.renewalIntervalRatio,
      maxHoldMs: lease.maxHoldMs,
      operations: {
        renew: async (held, ttlMs) => {
          const sentAt = performance.now();
          const renewed = await renewInLine(
            this.deps.collection,
            held.key,
            held.owner,
            ttlMs,
            this.deps.idleRetentionMs,
          );
          return renewed.renewed
            ? { renewed: true, sentAt, remainingMs: renewed.remainingMs }
            : { renewed: false, sentAt };
        },
        release: leave,
        // In the background: a give-back that gets no reply leaves the entry to its lease.
        giveBack: () => leave().catch(() => undefined),
        ended: () => undefined,
      },
    });
  }

  /** Leaves the line: a release. */
  release(hold: LineHold): Promise<boolean> {
    return this.leave(hold.key, hold.token);
  }

  /** Leaves the line by token; tells local waiters that now hold. */
  private async leave(key: string, token: string): Promise<boolean> {
    const left = await leaveLine(this.deps.collection, key, token, this.deps.idleRetentionMs);
    this.deps.waiters.heard(
      key,
      left.holders.map((entry) => entry.t),
    );
    return left.left;
  }

  private joinRequest(request: LineAcquireRequest, token: string): JoinRequest {
    return {
      key: request.key,
      token,
      holderId: this.deps.holderId,
      ttlMs: request.ttlMs,
      kind: request.kind,
      onlyIfHolds: request.timeoutMs === 0,
      idleRetentionMs: this.deps.idleRetentionMs,
      ...(request.scope === undefined ? {} : { scope: request.scope }),
    };
  }

  /**
   * A waiter that gives up leaves, retried until confirmed or until its entry's lease ends.
   * After a join with no reply, a leave that finds no entry may have come first: it is tried
   * again until the lease a late join would have given has ended.
   */
  private leaveInBackground(
    key: string,
    token: string,
    until: number,
    entry: 'joined' | 'unknown',
  ): void {
    const leave = async () => {
      for (let delayMs = 50; performance.now() < until; delayMs = Math.min(delayMs * 2, 1_000)) {
        try {
          const left = await this.leave(key, token);
          if (left || entry === 'joined') return;
        } catch {
          // No reply: try again.
        }
        await sleep(delayMs, false);
      }
    };
    void leave();
  }
}
