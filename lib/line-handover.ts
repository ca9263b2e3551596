import { clearImmediate, setImmediate, setTimeout } from 'node:timers';
import type { HandableLease } from './lease-keeper';
import { FENCES_PER_ENTRY } from './store/line/line-document';
import type { HeldDocument } from './store/line/line-commands';

/**
 * Hand-over within one process (option `localHandOff`), engine v2's one protocol shortcut. An
 * unscoped mutex caller (`releaseScope` may remove a scoped entry) queues behind this process's
 * entry on the key while its run lasts, and at the release takes it over without a write: same
 * token and lease, next fence, if the lease fits (`passes`). Others see one entry. So that a loop
 * on a contended key does not pay a hand-off between processes per section, an entry that waited,
 * on a key asked for again within a turn of its release, is kept to the next turn if released
 * with nobody queued. Safe: the entry holds by position until it leaves or its lease ends, and
 * each taker keeps its predecessor's local deadline (before the server's). Fair: a run ends
 * {@link RUN_MS} after its first holder began, or at 16 holders; then the first caller still
 * queued joins the line. In call order: a key has one such entry here at a time, and every caller
 * comes behind it (past its 16 fences too) until the run ends; then the others stay queued, ahead
 * of later callers, behind the next entry that first caller makes.
 */

/** A key held by position in its line; its entry may pass to `followers`. */
export interface LineHold {
  key: string;
  /** Release and renewals go by it. */
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
  runTimer: NodeJS.Timeout | undefined;
  /** Released with nobody queued, and kept for a caller who asks before the next turn. */
  kept: KeptEntry | undefined;

  /** `waited`: the entry joined behind others, so the key is wanted elsewhere too. */
  constructor(
    readonly key: string,
    readonly waited = false,
  ) {}

  /** Whether the entry still passes to followers: it waits, or its run is young. */
  get running(): boolean {
    return this.heldSince === undefined || performance.now() - this.heldSince < RUN_MS;
  }
}

interface KeptEntry {
  hold: LineHold;
  lease: HandableLease;
  leave(): Promise<unknown>;
  timer: NodeJS.Immediate;
}

interface Follower {
  owner: EntryFollowers;
  ttlMs: number;
  /** Hands the entry over (a hold), or tells the caller to join itself (undefined). */
  take(hold: LineHold | undefined, opens?: EntryFollowers): void;
}

export interface FollowRequest {
  key: string;
  scope?: string;
  ttlMs: number;
  /** Monotonic time at which the caller gives up. */
  deadline: number;
  signal?: AbortSignal;
  /** The error a caller that waited until its deadline fails with. */
  timedOut(): Error;
}

/** How many keys {@link LineHandover} remembers as taken again right after a release. */
const LOOPED_KEYS = 256;

export class LineHandover {
  /** Per key, the entry of this process that callers here follow, until it is dissolved. */
  private readonly open = new Map<string, EntryFollowers>();
  private following = 0;
  /** Keys whose release's leave was answered in this turn of the event loop. */
  private readonly leftThisTurn = new Set<string>();
  /** Keys a caller here asked for again within a turn of our release: kept at the next one. */
  private readonly looped = new Set<string>();
  /** Keys an operator command is removing the holders of (`closeKey` until reopened). */
  private readonly closing = new Map<string, number>();

  constructor(private readonly enabled: boolean) {}

  /** Callers queued behind an entry here. */
  get size(): number {
    return this.following;
  }

  /**
   * An entry of ours that waits in line, or holds without having waited: callers here may
   * queue behind it. Undefined when another entry here takes them (or the option is off).
   */
  opened(key: string, holds: boolean, opens?: EntryFollowers): EntryFollowers | undefined {
    if (opens && this.open.get(key) === opens && !this.closing.has(key)) {
      if (holds) this.held(opens);
      return opens;
    }
    // Callers join only while no entry here is open (`follow`): one is never replaced, or those
    // queued behind it would rejoin behind later callers.
    if (!this.enabled || this.closing.has(key) || this.open.has(key)) return undefined;
    const followers = new EntryFollowers(key, !holds);
    this.open.set(key, followers);
    if (holds) this.held(followers);
    return followers;
  }

  /** The first holder begins: {@link RUN_MS} from now, the callers still queued join the line. */
  held(followers: EntryFollowers | undefined): void {
    if (!followers || followers.heldSince !== undefined) return;
    followers.heldSince = performance.now();
    followers.runTimer = setTimeout(() => this.dissolved(followers), RUN_MS);
    followers.runTimer.unref();
  }

  /**
   * The entry is gone or will not be handed on: its first follower joins the line, behind the
   * other processes (fair), told to make the next entry, which the others stay queued behind,
   * ahead of any caller here who comes later (one whose step was under way too). `rejoin`
   * false (an operator command, close): every follower joins by itself.
   */
  dissolved(followers: EntryFollowers | undefined, rejoin = true): void {
    if (!followers) return;
    clearTimeout(followers.runTimer);
    if (this.open.get(followers.key) === followers) this.open.delete(followers.key);
    const queue = followers.queue.splice(0);
    if (
      rejoin &&
      queue.length > 0 &&
      !this.closing.has(followers.key) &&
      !this.open.has(followers.key)
    ) {
      // The first joins; the others stay queued, in call order, ahead of any later caller.
      const next = new EntryFollowers(followers.key, true);
      const [first, ...rest] = queue;
      for (const follower of rest) follower.owner = next;
      next.queue.push(...rest);
      this.open.set(followers.key, next);
      first.take(undefined, next);
    } else for (const follower of queue) follower.take(undefined);
    const kept = followers.kept;
    followers.kept = undefined;
    if (!kept) return;
    clearImmediate(kept.timer);
    void kept.leave();
  }

  /** A caller here that may take over an entry of ours asks for `key` (`looped` is LRU). */
  asks(key: string): void {
    if (!this.leftThisTurn.has(key)) return;
    this.looped.delete(key);
    this.looped.add(key);
    if (this.looped.size > LOOPED_KEYS) this.looped.delete(this.looped.values().next().value!);
  }

  /**
   * A caller here asks for `key` without taking over a kept entry of ours on it (another mode,
   * a scope): the entry leaves now. Its leave, for the caller to join after; else undefined.
   */
  letGo(key: string): Promise<unknown> | undefined {
    const followers = this.open.get(key);
    const kept = followers?.kept;
    if (!kept) return undefined;
    clearImmediate(kept.timer);
    followers.kept = undefined;
    this.dissolved(followers);
    return kept.leave();
  }

  /** Takes over our kept entry on `key` for `ttlMs`; undefined if none or it does not fit. */
  takeKept(key: string, ttlMs: number): LineHold | undefined {
    const followers = this.open.get(key);
    const kept = followers?.kept;
    if (!kept) return undefined;
    const { hold, lease, timer } = kept;
    if (!followers.running || !passes(hold, lease, ttlMs)) return undefined;
    clearImmediate(timer);
    followers.kept = undefined;
    return { ...hold, fence: hold.fence + 1n, leaseEnd: lease.end };
  }

  /** At close: every entry is handed to nobody more, and a kept one leaves. */
  closeAll(): void {
    for (const followers of [...this.open.values()]) this.dissolved(followers, false);
  }

  /**
   * Before `forceRelease` removes `key`'s holders: no entry here is handed on from now until
   * the returned function is called, once the command is answered (an entry that holds by a
   * join answered meanwhile is removed by it too), so no caller is handed a removed entry.
   */
  closeKey(key: string): () => void {
    this.closing.set(key, (this.closing.get(key) ?? 0) + 1);
    this.dissolved(this.open.get(key), false);
    let reopened = false;
    return () => {
      if (reopened) return;
      reopened = true;
      const count = this.closing.get(key)! - 1;
      if (count === 0) this.closing.delete(key);
      else this.closing.set(key, count);
    };
  }

  /**
   * Queues behind this process's entry on the key, if there is one (its run over, or its fences
   * taken: it is dissolved soon, and the caller joins again in its turn): settles with the hold
   * once it is handed over, or with undefined when the caller must join the line itself; rejects
   * at the deadline or abort, having sent nothing. Undefined: no entry to follow.
   */
  follow(request: FollowRequest): Promise<LineHold | EntryFollowers | undefined> | undefined {
    if (request.scope !== undefined) return undefined;
    const followers = this.open.get(request.key);
    if (followers?.kept) {
      const kept = this.takeKept(request.key, request.ttlMs);
      // Does not fit: the entry leaves, and the caller joins the line.
      if (!kept) this.dissolved(followers);
      return Promise.resolve(kept);
    }
    if (!followers) return undefined;
    return new Promise<LineHold | EntryFollowers | undefined>((resolve, reject) => {
      const { signal } = request;
      const leave = (settle: () => void) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const { queue } = follower.owner;
        const index = queue.indexOf(follower);
        if (index >= 0) queue.splice(index, 1);
        this.following -= 1;
        settle();
      };
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the caller's own abort reason
      const onAbort = () => leave(() => reject(signal?.reason));
      const follower: Follower = {
        owner: followers,
        ttlMs: request.ttlMs,
        take: (hold, opens) => leave(() => resolve(hold ?? opens)),
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
  handOn(hold: LineHold, lease: HandableLease | undefined, leave: () => Promise<unknown>): boolean {
    const followers = hold.followers;
    const next = followers?.queue[0];
    if (!next) {
      // Kept only while callers here can still find it (not after `closeKey` or `closeAll`).
      const findable = followers !== undefined && this.open.get(hold.key) === followers;
      const looped = this.looped.has(hold.key);
      if (
        findable &&
        looped &&
        followers.waited &&
        followers.running &&
        passes(hold, lease, hold.ttlMs)
      ) {
        const timer = setImmediate(() => {
          this.looped.delete(hold.key);
          this.dissolved(followers);
        });
        followers.kept = { hold, lease, leave, timer };
        return true;
      }
      // Not kept: the key counts as looped again only if a caller asks right after this leave.
      this.looped.delete(hold.key);
      this.dissolved(followers);
      return false;
    }
    if (!passes(hold, lease, next.ttlMs) || !followers.running) {
      this.dissolved(followers);
      return false;
    }
    const fence = hold.fence + 1n;
    next.take({ ...hold, fence, leaseEnd: lease.end });
    // Its last fence: those still queued join the line now, while it works, so that its
    // release's leave alone makes the first of them holder (not a leave and a join after it).
    if (isLastFence(fence)) this.dissolved(followers);
    return true;
  }

  /** Our release's leave on `key` was answered: a caller asking within this turn loops. */
  left(key: string): void {
    if (!this.enabled) return;
    if (this.leftThisTurn.size === 0) setImmediate(() => this.leftThisTurn.clear());
    this.leftThisTurn.add(key);
  }
}

/** Whether a fence is left, the lease is no shorter than `ttlMs`, and half of `ttlMs` remains. */
function passes(
  hold: LineHold,
  lease: HandableLease | undefined,
  ttlMs: number,
): lease is HandableLease {
  return (
    !isLastFence(hold.fence) &&
    lease !== undefined &&
    ttlMs <= lease.ttlMs &&
    lease.end - performance.now() >= ttlMs / 2
  );
}

/** The last fence of an entry's block: a holder with it cannot pass the entry on. */
function isLastFence(fence: bigint): boolean {
  return fence % FENCES_PER_ENTRY === FENCES_PER_ENTRY - 1n;
}
