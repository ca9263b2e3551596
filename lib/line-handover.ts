import { setTimeout } from 'node:timers';
import type { HandableLease } from './lease-keeper';
import type { LineHold } from './line-acquirer';
import { FENCES_PER_ENTRY } from './store/line/line-document';

/**
 * Engine v2's hand-over within one process (module option `localHandOff`), the one shortcut
 * of its protocol. A caller here that asks for a mutex while an entry of this process waits
 * in the key's line queues behind that entry instead of joining (unscoped calls only:
 * `releaseScope` may remove a scoped entry behind its holder's back); when the entry's holder
 * releases, the next such caller takes the entry over without a write: the same token and
 * lease, and the next of the entry's fences, if the lease fits it (its `ttlMs` or less, half
 * of it left). Nothing else changes: other processes see one entry, as before, and it leaves
 * the line by the last caller's release.
 *
 * Why it is safe: the entry holds, by position, until it leaves or its lease ends, and every
 * caller it passes to keeps the lease deadline its predecessor knew, which is before the
 * server's end. Why it is fair: an entry passes from caller to caller only until {@link RUN_MS}
 * after its first holder began, and to 16 holders at most; then its followers join the line
 * behind the other processes.
 */

/** How long after its first holder began an entry may still pass to followers. */
export const RUN_MS = 50;

/** This process's entry on a key, and the callers queued behind it, in call order. */
export class EntryFollowers {
  readonly queue: Follower[] = [];
  /** When the entry's first holder began (monotonic); undefined while it waits. */
  heldSince: number | undefined;

  constructor(readonly key: string) {}

  /** Whether the entry still passes to followers: it waits, or its run is young. */
  get running(): boolean {
    return this.heldSince === undefined || performance.now() - this.heldSince < RUN_MS;
  }
}

interface Follower {
  ttlMs: number;
  /** Hands the entry over (a hold), or tells the caller to join itself (undefined). */
  take(hold: LineHold | undefined): void;
}

export interface FollowRequest {
  key: string;
  /** A scoped call never follows. */
  scope?: string;
  ttlMs: number;
  /** Monotonic time at which the caller gives up. */
  deadline: number;
  signal: AbortSignal | undefined;
  /** The error a caller that waited until its deadline fails with. */
  timedOut(): Error;
}

export class LineHandover {
  /** Per key, the entry of this process that callers here may follow. */
  private readonly open = new Map<string, EntryFollowers>();

  constructor(private readonly enabled: boolean) {}

  /**
   * An entry of ours that waits in line, or holds without having waited: callers here may
   * queue behind it. Undefined when another entry here takes them (or the option is off).
   */
  opened(key: string, holds: boolean): EntryFollowers | undefined {
    const current = this.open.get(key);
    // An entry whose run ended is left to its last holder's release (or its lease's end).
    if (!this.enabled || current?.running) return undefined;
    const followers = new EntryFollowers(key);
    if (holds) followers.heldSince = performance.now();
    this.open.set(key, followers);
    return followers;
  }

  /** The entry's first holder begins now. */
  held(followers: EntryFollowers | undefined): void {
    if (followers) followers.heldSince ??= performance.now();
  }

  /** The entry is gone or will not be handed on: its followers join the line themselves. */
  dissolved(followers: EntryFollowers | undefined): void {
    if (!followers) return;
    if (this.open.get(followers.key) === followers) this.open.delete(followers.key);
    for (const follower of followers.queue.splice(0)) follower.take(undefined);
  }

  /**
   * Queues behind this process's entry on the key, if there is one in its run with room: settles
   * with the hold once it is handed over, or with undefined when the caller must join the line
   * itself; rejects at the deadline or abort, having sent nothing. Undefined: no entry to follow.
   */
  follow(request: FollowRequest): Promise<LineHold | undefined> | undefined {
    const followers = this.open.get(request.key);
    // The entry's first holder and each follower take one of its fences.
    const room = BigInt(followers?.queue.length ?? 0) + 1n < FENCES_PER_ENTRY;
    if (!followers?.running || request.scope !== undefined || !room) return undefined;
    return new Promise<LineHold | undefined>((resolve, reject) => {
      const { signal } = request;
      const leave = (settle: () => void) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const index = followers.queue.indexOf(follower);
        if (index >= 0) followers.queue.splice(index, 1);
        settle();
      };
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the caller's own abort reason
      const onAbort = () => leave(() => reject(signal?.reason));
      const follower: Follower = {
        ttlMs: request.ttlMs,
        take: (hold) => leave(() => resolve(hold)),
      };
      const timer = setTimeout(
        () => leave(() => reject(request.timedOut())),
        Math.max(0, request.deadline - performance.now()),
      );
      signal?.addEventListener('abort', onAbort, { once: true });
      followers.queue.push(follower);
      if (signal?.aborted) onAbort();
    });
  }

  /**
   * At the release of `hold`: hands its entry to the next follower, with `lease` as the
   * holder's keeper knows it (undefined: only a write can tell whether it is still ours). True
   * when handed over; else the followers join the line themselves and the caller leaves it.
   */
  handOn(hold: LineHold, lease: HandableLease | undefined): boolean {
    const followers = hold.followers;
    const next = followers?.queue[0];
    if (!next) {
      // Nobody to pass to: the entry leaves, and callers who come now join the line.
      this.dissolved(followers);
      return false;
    }
    const lastFence = hold.fence % FENCES_PER_ENTRY === FENCES_PER_ENTRY - 1n;
    // The lease fits the follower as if it had just taken it: its own `ttlMs` or less, and at
    // least half of that left.
    const fits =
      lease !== undefined &&
      next.ttlMs <= lease.ttlMs &&
      lease.end - performance.now() >= next.ttlMs / 2;
    if (lastFence || !fits || !followers.running) {
      this.dissolved(followers);
      return false;
    }
    next.take({ ...hold, fence: hold.fence + 1n, leaseEnd: lease.end });
    return true;
  }
}
