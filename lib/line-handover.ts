import { setTimeout } from 'node:timers';
import type { HandableLease } from './lease-keeper';
import { FENCES_PER_ENTRY } from './store/line/line-document';
import type { HeldDocument } from './store/line/line-commands';

/**
 * Engine v2's hand-over within one process (module option `localHandOff`), the one shortcut
 * of its protocol. A caller here that asks for a mutex, unscoped (`releaseScope` may remove a
 * scoped entry behind its holder's back), while an entry of this process is in the key's line
 * and in its run, queues behind that entry instead of joining. When the entry's holder
 * releases, the next such caller takes the entry over without a write: the same token and
 * lease, and the next of the entry's fences, if the lease fits it (it asked for no longer a
 * lease than the holder's, and half of what it asked for is left). Other processes see one
 * entry, as before; it leaves the line by its last holder's release.
 *
 * Why it is safe: the entry holds, by position, until it leaves or its lease ends, and every
 * caller it passes to keeps the lease deadline its predecessor knew, which is before the
 * server's end. Why it is fair: an entry's run lasts while it waits and {@link RUN_MS} after
 * its first holder began, for 16 holders at most; the callers still queued when it ends join
 * the line then, behind the other processes.
 */

/**
 * A key held by position in its line (the acquirer's result). Its entry may be handed to the
 * callers of this process queued behind it (`followers`).
 */
export interface LineHold {
  key: string;
  /** The entry's token: its release and renewals go by it. */
  token: string;
  fence: bigint;
  /** Local monotonic deadline of the lease, as of the last write that set it. */
  leaseEnd: number;
  /** The lease a join of this call asks for (a late one among them would start it again). */
  ttlMs: number;
  followers?: EntryFollowers;
  /** A document lock's document, when the write that made the entry hold read it. */
  document?: HeldDocument;
}

/** How long after its first holder began an entry may still pass to followers. */
export const RUN_MS = 50;

/** This process's entry on a key, and the callers queued behind it, in call order. */
export class EntryFollowers {
  readonly queue: Follower[] = [];
  /** When the entry's first holder began (monotonic); undefined while it waits. */
  heldSince: number | undefined;
  /** Followers it was handed to so far: each took one of its fences. */
  handed = 0;
  /** Ends the run {@link RUN_MS} after the first holder began. */
  runTimer: NodeJS.Timeout | undefined;

  constructor(readonly key: string) {}

  /** Whether the entry still passes to followers: it waits, or its run is young. */
  get running(): boolean {
    return this.heldSince === undefined || performance.now() - this.heldSince < RUN_MS;
  }

  /** Whether one more caller may queue: a fence of the entry's is left for it. */
  get room(): boolean {
    // The first holder has the entry's first fence; each follower, one more.
    return BigInt(1 + this.handed + this.queue.length) < FENCES_PER_ENTRY;
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
  private following = 0;

  constructor(private readonly enabled: boolean) {}

  /** Callers queued behind an entry here. */
  get size(): number {
    return this.following;
  }

  /**
   * An entry of ours that waits in line, or holds without having waited: callers here may
   * queue behind it. Undefined when another entry here takes them (or the option is off).
   */
  opened(key: string, holds: boolean): EntryFollowers | undefined {
    const current = this.open.get(key);
    // An entry whose run ended is left to its last holder's release (or its lease's end).
    if (!this.enabled || current?.running) return undefined;
    const followers = new EntryFollowers(key);
    this.open.set(key, followers);
    if (holds) this.held(followers);
    return followers;
  }

  /**
   * The entry's first holder begins now: its run ends {@link RUN_MS} from now, and the callers
   * still queued then join the line (whatever became of the entry: released, lost, or left to
   * run out).
   */
  held(followers: EntryFollowers | undefined): void {
    if (!followers || followers.heldSince !== undefined) return;
    followers.heldSince = performance.now();
    followers.runTimer = setTimeout(() => this.dissolved(followers), RUN_MS);
    followers.runTimer.unref();
  }

  /** The entry is gone or will not be handed on: its followers join the line themselves. */
  dissolved(followers: EntryFollowers | undefined): void {
    if (!followers) return;
    clearTimeout(followers.runTimer);
    if (this.open.get(followers.key) === followers) this.open.delete(followers.key);
    for (const follower of followers.queue.splice(0)) follower.take(undefined);
  }

  /**
   * Before an operator removes `key`'s holders here (`forceRelease`): the entry is handed to
   * nobody more, so that no caller is handed a removed entry.
   */
  closeKey(key: string): void {
    this.dissolved(this.open.get(key));
  }

  /**
   * Queues behind this process's entry on the key, if there is one in its run with room: settles
   * with the hold once it is handed over, or with undefined when the caller must join the line
   * itself; rejects at the deadline or abort, having sent nothing. Undefined: no entry to follow.
   */
  follow(request: FollowRequest): Promise<LineHold | undefined> | undefined {
    const followers = this.open.get(request.key);
    if (!followers?.running || !followers.room || request.scope !== undefined) return undefined;
    return new Promise<LineHold | undefined>((resolve, reject) => {
      const { signal } = request;
      const leave = (settle: () => void) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const index = followers.queue.indexOf(follower);
        if (index >= 0) followers.queue.splice(index, 1);
        this.following -= 1;
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
    // The lease fits the follower as if it had just taken it: it asked for no longer a lease
    // than the holder's, and at least half of what it asked for is left.
    const fits =
      lease !== undefined &&
      next.ttlMs <= lease.ttlMs &&
      lease.end - performance.now() >= next.ttlMs / 2;
    if (lastFence || !fits || !followers.running) {
      this.dissolved(followers);
      return false;
    }
    followers.handed += 1;
    next.take({ ...hold, fence: hold.fence + 1n, leaseEnd: lease.end });
    return true;
  }
}
