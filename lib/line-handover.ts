import { setTimeout } from 'node:timers';
import type { LineHold } from './line-acquirer';
import { FENCES_PER_ENTRY } from './store/line/line-document';

/**
 * Engine v2's hand-over within one process (module option `localHandOff`), the one shortcut
 * of its protocol. A caller here that asks for a mutex while an entry of this process waits
 * in the key's line queues behind that entry instead of joining; when the entry's holder
 * releases, the next such caller takes the entry over without a write: the same token and
 * lease, and the next of the entry's fences. Nothing else changes: other processes see one
 * entry, as before, and it leaves the line by the last caller's release.
 *
 * Why it is safe: the entry holds, by position, until it leaves or its lease ends, and every
 * caller it passes to keeps the lease deadline its predecessor knew, which is before the
 * server's end. Why it is fair: an entry takes followers only while it waits; once it holds,
 * new callers join the line themselves, so other processes wait at most one batch (at most
 * 15 callers) behind each entry of this one.
 */

/** This process's waiting entry on a key, and the callers queued behind it, in call order. */
export class EntryFollowers {
  readonly queue: Follower[] = [];
  /** Whether callers may still queue: the entry waits in line. */
  open = true;

  constructor(
    readonly key: string,
    readonly scope: string | undefined,
  ) {}
}

interface Follower {
  ttlMs: number;
  /** Hands the entry over (a hold), or tells the caller to join itself (undefined). */
  take(hold: LineHold | undefined): void;
}

export interface FollowRequest {
  key: string;
  scope?: string;
  ttlMs: number;
  /** Monotonic time at which the caller gives up. */
  deadline: number;
  signal: AbortSignal | undefined;
  /** The error a caller that waited until its deadline fails with. */
  timedOut(): Error;
}

export class LineHandover {
  /** Per key, the entry of this process that waits in line and takes followers. */
  private readonly open = new Map<string, EntryFollowers>();
  private following = 0;

  constructor(private readonly enabled: boolean) {}

  /** Callers queued behind an entry here. */
  get size(): number {
    return this.following;
  }

  /** An entry that waits in line: callers here may queue behind it until it holds. */
  opened(key: string, scope: string | undefined): EntryFollowers | undefined {
    if (!this.enabled || this.open.has(key)) return undefined;
    const followers = new EntryFollowers(key, scope);
    this.open.set(key, followers);
    return followers;
  }

  /** The entry holds: callers who come now join the line themselves. */
  closed(followers: EntryFollowers | undefined): void {
    if (!followers) return;
    followers.open = false;
    if (this.open.get(followers.key) === followers) this.open.delete(followers.key);
  }

  /** The entry is gone or will not be handed on: its followers join the line themselves. */
  dissolved(followers: EntryFollowers | undefined): void {
    if (!followers) return;
    this.closed(followers);
    for (const follower of followers.queue.splice(0)) follower.take(undefined);
  }

  /**
   * Queues behind this process's waiting entry on the key, if there is one with room: settles
   * with the hold once it is handed over, or with undefined when the caller must join the line
   * itself; rejects at the deadline or abort, having sent nothing. Undefined: no entry to follow.
   */
  follow(request: FollowRequest): Promise<LineHold | undefined> | undefined {
    const followers = this.open.get(request.key);
    // The entry's first holder and each follower take one of its fences.
    const room = BigInt(followers?.queue.length ?? 0) + 1n < FENCES_PER_ENTRY;
    if (!followers || followers.scope !== request.scope || !room) return undefined;
    return new Promise<LineHold | undefined>((resolve, reject) => {
      const { signal } = request;
      const leave = (settle: () => void) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.following -= 1;
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
      this.following += 1;
      if (signal?.aborted) onAbort();
    });
  }

  /**
   * At the release of `hold`: hands its entry to the next follower, within `leaseEnd` (the
   * lease's local deadline as its keeper knows it; undefined: only a write can tell whether
   * the lease is still ours). True when handed over; else the followers join themselves and
   * the caller leaves the line.
   */
  handOn(hold: LineHold, leaseEnd: number | undefined): boolean {
    const followers = hold.followers;
    const next = followers?.queue[0];
    if (!next) return false;
    const lastFence = hold.fence % FENCES_PER_ENTRY === FENCES_PER_ENTRY - 1n;
    // The follower must have time to renew before the deadline it inherits.
    const shortLease = leaseEnd === undefined || leaseEnd - performance.now() <= next.ttlMs / 3;
    if (lastFence || shortLease) {
      this.dissolved(followers);
      return false;
    }
    next.take({ ...hold, fence: hold.fence + 1n, leaseEnd });
    return true;
  }
}
