/**
 * An entry named by news: token `t` and fence. A join retried by its token can make a second
 * entry with the same token once the first ended: the fence tells them apart.
 */
export interface HeardEntry {
  t: string;
  fence: bigint;
}

/** One waiting entry's news so far: what each fence of its token was heard to hold with. */
class EntryNews {
  /** Made at the first news: most waits hear one, and there are many waits. */
  private byFence: Map<bigint, unknown> | undefined;
  private wake: (() => void) | undefined;

  constructor(readonly stop: () => void) {}

  add(fence: bigint, news: unknown): void {
    this.byFence ??= new Map();
    if (!this.byFence.has(fence)) this.byFence.set(fence, news);
    this.wake?.();
  }

  /** Settles, with its news, once the entry of `fence` is heard to hold (one reader at a time). */
  heardAs(fence: bigint): Promise<unknown> {
    return new Promise((resolve) => {
      this.wake = () => {
        if (this.byFence?.has(fence)) resolve(this.byFence.get(fence));
      };
      this.wake();
    });
  }
}

/** A waiting entry's ear: {@link EntryNews.heardAs}, and `stop()` to forget it. */
export type EntryListener = Pick<EntryNews, 'heardAs' | 'stop'>;

/**
 * The callers of this process waiting in keys' lines, by key and entry: woken when a decoded
 * change event or a release's reply says their entry now holds. Knows nothing of documents
 * or wire formats: an entry is an opaque token and a fence.
 */
export class LineWaiters {
  private readonly byKey = new Map<string, Map<string, EntryNews>>();
  /** Per key, the waits to wake when news of it may have been missed. */
  private readonly nudges = new Map<string, Set<() => void>>();
  /** How many times every key's waiters, and (while some wait) one key's, were told to look. */
  private looksAtEveryKey = 0;
  private readonly looksAtKey = new Map<string, number>();

  /** Listens for news that entry `entry` holds `key`, with its opaque payload (a document). */
  wait(key: string, entry: string): EntryListener {
    const news: EntryNews = new EntryNews(() => {
      const current = this.byKey.get(key);
      if (current?.get(entry) !== news) return;
      current.delete(entry);
      if (current.size > 0) return;
      this.byKey.delete(key);
      this.looksAtKey.delete(key);
    });
    let waiters = this.byKey.get(key);
    if (!waiters) this.byKey.set(key, (waiters = new Map<string, EntryNews>()));
    waiters.set(entry, news);
    return news;
  }

  /** `holders` hold `key` now: tells those that wait here, with `news`. */
  heard(key: string, holders: readonly HeardEntry[], news?: unknown): void {
    const waiters = this.byKey.get(key);
    if (!waiters) return;
    for (const { t, fence } of holders) waiters.get(t)?.add(fence, news);
  }

  /**
   * Settles at the next {@link lookAgain} for `key` or every key, or at once if one came after
   * the {@link stamp} `since` (during the waiter's last command): news may have been missed
   * (the change stream failed, reopened or gave way to polling, or other code rewrote the
   * line). `cancel` forgets it; one per wait round.
   */
  nudged(key: string, since: number): { nudged: Promise<void>; cancel: () => void } {
    if (this.stamp(key) > since) return { nudged: Promise.resolve(), cancel: () => undefined };
    let wake!: () => void;
    const nudged = new Promise<void>((resolve) => (wake = resolve));
    let nudges = this.nudges.get(key);
    if (!nudges) this.nudges.set(key, (nudges = new Set()));
    nudges.add(wake);
    const cancel = () => {
      nudges.delete(wake);
      if (nudges.size === 0 && this.nudges.get(key) === nudges) this.nudges.delete(key);
    };
    return { nudged, cancel };
  }

  /** How often `key`'s waiters were told to look: a waiter stamps each command it sends. */
  stamp(key: string): number {
    return this.looksAtEveryKey + (this.looksAtKey.get(key) ?? 0);
  }

  /** Wakes the waiters of `key` (default: of every key) to look at their place again. */
  lookAgain(key?: string): void {
    if (key === undefined) this.looksAtEveryKey += 1;
    else if (this.byKey.has(key)) this.looksAtKey.set(key, (this.looksAtKey.get(key) ?? 0) + 1);
    const keys = key === undefined ? [...this.nudges.keys()] : [key];
    for (const each of keys) {
      const nudges = this.nudges.get(each);
      this.nudges.delete(each);
      for (const wake of nudges ?? []) wake();
    }
  }

  /** Callers waiting here, on every key but those `uncounted` says to leave out. */
  count(uncounted: (key: string) => boolean = () => false): number {
    let count = 0;
    for (const [key, waiters] of this.byKey) if (!uncounted(key)) count += waiters.size;
    return count;
  }
}
