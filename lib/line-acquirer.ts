import { randomBytes } from 'node:crypto';
import { LockNotAcquiredError } from './errors/lock-not-acquired.error';
import { localLeaseEnd } from './lease-keeper';
import { notAcquiredMessage } from './lock.messages';
import type { JoinResult, LineCollection } from './store/line/line-commands';
import { joinLine, leaveLine, renewInLine } from './store/line/line-commands';
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

export interface LineAcquirerDeps {
  collection: LineCollection;
  waiters: LineWaiters;
  holderId: string;
  idleRetentionMs: number;
}

/** Waits until `heard` resolves, monotonic time `until`, or `signal` aborts. */
async function wakeUp(
  heard: Promise<void>,
  until: number,
  signal: AbortSignal | undefined,
): Promise<'heard' | 'timer' | 'aborted'> {
  if (signal?.aborted) return 'aborted';
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<'aborted'>((resolve) => {
    onAbort = () => resolve('aborted');
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timer'>((resolve) => {
    timer = setTimeout(() => resolve('timer'), Math.max(0, until - performance.now()));
  });
  try {
    return await Promise.race([heard.then(() => 'heard' as const), timedOut, aborted]);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener('abort', onAbort);
  }
}

export class LineAcquirer {
  constructor(private readonly deps: LineAcquirerDeps) {}

  async acquire(request: LineAcquireRequest): Promise<LineHold> {
    const { key, ttlMs } = request;
    const token = randomBytes(16).toString('hex');
    const deadline = performance.now() + request.timeoutMs;
    // Listening before the join: the event that makes us holder may come before its reply.
    let waiting = this.deps.waiters.wait(key, token);
    try {
      let sentAt = performance.now();
      let place: LinePlace = await this.join(request, token);
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
        if (woke === 'timer' && performance.now() >= deadline) throw this.notAcquired(request);
        sentAt = performance.now();
        const renewed = await renewInLine(this.deps.collection, key, token, ttlMs);
        if (renewed.renewed) {
          place = renewed;
        } else {
          // Our entry ran out (a long stall): join again, at the back.
          waiting.stop();
          waiting = this.deps.waiters.wait(key, token);
          place = await this.join(request, token);
        }
      }
    } catch (error) {
      this.leaveInBackground(key, token, performance.now() + ttlMs);
      throw error;
    } finally {
      waiting.stop();
    }
  }

  /** Leaves the line: a release; tells local waiters that now hold. */
  async release(hold: LineHold): Promise<boolean> {
    const left = await leaveLine(
      this.deps.collection,
      hold.key,
      hold.token,
      this.deps.idleRetentionMs,
    );
    this.deps.waiters.heard(
      hold.key,
      left.holders.map((entry) => entry.t),
    );
    return left.left;
  }

  private async join(request: LineAcquireRequest, token: string) {
    const joined: JoinResult = await joinLine(this.deps.collection, {
      key: request.key,
      token,
      holderId: this.deps.holderId,
      ttlMs: request.ttlMs,
      kind: request.kind,
      onlyIfHolds: request.timeoutMs === 0,
      ...(request.scope === undefined ? {} : { scope: request.scope }),
    });
    if (joined.joined) return joined;
    throw new LockNotAcquiredError(
      notAcquiredMessage([request.key], request.timeoutMs, joined.holderId, joined.retryAfterMs),
      { keys: [request.key], holderId: joined.holderId, retryAfterMs: joined.retryAfterMs },
    );
  }

  private notAcquired(request: LineAcquireRequest): LockNotAcquiredError {
    return new LockNotAcquiredError(
      notAcquiredMessage([request.key], request.timeoutMs, undefined, undefined),
      {
        keys: [request.key],
      },
    );
  }

  /** A waiter that gives up leaves, retried until confirmed or until its entry's lease ends. */
  private leaveInBackground(key: string, token: string, until: number): void {
    const leave = async () => {
      for (let delayMs = 50; performance.now() < until; delayMs = Math.min(delayMs * 2, 1_000)) {
        try {
          await this.release({ key, token, fence: 0n, leaseEnd: until });
          return;
        } catch {
          await sleep(delayMs, false);
        }
      }
    };
    void leave();
  }
}
