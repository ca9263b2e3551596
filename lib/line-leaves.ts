import { CallOrder } from './call-order';
import type { LineHold } from './line-handover';
import type { LineStorage } from './store/line/line-store';
import { sleep } from './util/timers';
import type { LineWaiters } from './waiting/line-waiters';

/**
 * Leaving keys' lines: a release's leave (which tells local waiters who holds now), and leaves in
 * the background (a waiter that gave up, a give-back, an entry a late join made again), retried
 * until answered or the entry's lease ends. Owns the leaves under way: `close()` waits for them.
 */
export class LineLeaves {
  private readonly leaving = new Set<Promise<boolean | undefined>>();
  /** Per key, our leaves under way in the background (`inBackground`). */
  private readonly inBackgroundOn = new Map<string, Set<BackgroundLeave>>();
  /** Per key, the operator commands under way that the key's leaves wait for (`holdBack`). */
  private readonly heldBack = new CallOrder();

  constructor(
    private readonly store: LineStorage,
    private readonly waiters: LineWaiters,
  ) {}

  /**
   * Holds back `key`'s leaves until the returned function is called, while an operator command
   * removes its holders: a leave could hand the key to a process whose grant it would remove.
   */
  holdBack(key: string): () => void {
    return this.heldBack.start(key).done;
  }

  /**
   * Our entries on `key` known to be there that are leaving in the background (a release MongoDB
   * did not confirm, a waiter that gave up): sends their leaves now, unless one is on its way,
   * so that our next join there does not find them ahead of it. A leave that finds its entry
   * answers for its retries (the release counts as done); they go on if it fails. Undefined when
   * there are none (the usual case: nothing to wait for).
   */
  hurry(key: string): Promise<unknown> | undefined {
    const leaves = this.inBackgroundOn.get(key);
    if (!leaves) return undefined;
    // One past its lease end is gone, by time alone.
    const live = [...leaves].filter((leave) => performance.now() < leave.until);
    return Promise.all(live.map((leave) => leave.send().catch(() => false)));
  }

  /** Leaves the line by token; tells local waiters that now hold. False: no entry of ours. */
  async leave(key: string, token: string): Promise<boolean> {
    await this.heldBack.pending(key);
    const left = await this.store.leave(key, token);
    this.waiters.heard(key, left.holders);
    return left.left;
  }

  /**
   * Retries until a leave is answered or `until` (the entry's lease end): undefined then. After a
   * join with no reply (`unknown`), a leave finding no entry may have beaten it, so it goes on.
   */
  inBackground(
    key: string,
    token: string,
    until: number,
    entry: 'joined' | 'unknown',
  ): Promise<boolean | undefined> {
    const background = new BackgroundLeave(() => this.leave(key, token), entry, until);
    // A join of ours that lands meanwhile is left once its reply comes, not at the next retry.
    if (entry === 'unknown') void this.store.joinsSettled?.(key, token)?.then(background.nudge);
    const leave = async (): Promise<boolean | undefined> => {
      for (let delayMs = 50; performance.now() < until; delayMs = Math.min(delayMs * 2, 1_000)) {
        try {
          await background.send();
        } catch {
          // No reply: try again.
        }
        if (background.outcome !== undefined) break;
        await background.pause(delayMs);
      }
      // A leave `hurry` sent before `until` answers still.
      await background.sent();
      return background.outcome;
    };
    // After a join with no reply the entry may not be there: not worth a caller's round trip.
    const leaving = leave();
    return this.track(entry === 'joined' ? this.whileLeaving(key, background, leaving) : leaving);
  }

  /**
   * The entry ended (left, or a document's commit): a join of its call still on its way may land
   * later and make it again, nobody's. Once such joins settle, it is left again in the background.
   */
  ended(hold: Pick<LineHold, 'key' | 'token' | 'ttlMs'>): void {
    const late = this.store.joinsSettled?.(hold.key, hold.token);
    if (!late) return;
    void this.track(
      late.then(() =>
        this.inBackground(hold.key, hold.token, performance.now() + hold.ttlMs, 'joined'),
      ),
    );
  }

  /** Settles once the leaves under way in the background have (each within its lease). */
  async settled(): Promise<void> {
    // A leave that settles may start another (`ended`).
    while (this.leaving.size > 0) await Promise.all([...this.leaving]);
  }

  /** Lists `background` among `key`'s leaves in the background until `leaving` settles. */
  private whileLeaving<T>(key: string, background: BackgroundLeave, leaving: Promise<T>) {
    const leaves = this.inBackgroundOn.get(key) ?? new Set<BackgroundLeave>();
    this.inBackgroundOn.set(key, leaves.add(background));
    const done = () => {
      leaves.delete(background);
      if (leaves.size === 0) this.inBackgroundOn.delete(key);
    };
    void leaving.then(done, done);
    return leaving;
  }

  private track(leaving: Promise<boolean | undefined>): Promise<boolean | undefined> {
    this.leaving.add(leaving);
    void leaving.finally(() => this.leaving.delete(leaving));
    return leaving;
  }
}

/** An entry of ours left in the background: one leave at a time, by its retries or `hurry`. */
class BackgroundLeave {
  /** Once known: the entry was left (true), or, known joined, was gone already (false). */
  outcome: boolean | undefined;
  private sending: Promise<boolean> | undefined;
  /** Ends the retry's `pause`. */
  private wake: (() => void) | undefined;
  /** The next leave goes without a pause (`nudge`). */
  private nudged = false;

  constructor(
    private readonly leave: () => Promise<boolean>,
    private readonly entry: 'joined' | 'unknown',
    /** The entry's lease end: past it, the entry is gone by time alone. */
    readonly until: number,
  ) {}

  /** Sends a leave, or shares the one on its way; true if the entry was left. */
  send(): Promise<boolean> {
    if (this.outcome !== undefined) return Promise.resolve(this.outcome);
    this.sending ??= this.leave()
      .then((left) => {
        // After a join with no reply, a leave finding none may have beaten it: not known yet.
        if (left || this.entry === 'joined') {
          this.outcome ??= left;
          this.wake?.();
        }
        return this.outcome ?? left;
      })
      .finally(() => (this.sending = undefined));
    return this.sending;
  }

  /** Settles once the leave on its way, if any, has. */
  async sent(): Promise<void> {
    await this.sending?.catch(() => undefined);
  }

  /** Makes the next leave go now: ends the retry's pause, or skips the next one. */
  readonly nudge = () => {
    this.nudged = true;
    this.wake?.();
  };

  /** Waits `ms` (not keeping the process alive), or less if a leave `hurry` sent settles it. */
  pause(ms: number): Promise<unknown> {
    if (this.nudged) {
      this.nudged = false;
      return Promise.resolve();
    }
    const woken = new Promise<void>((resolve) => (this.wake = resolve));
    return Promise.race([sleep(ms, false), woken]).finally(() => (this.nudged = false));
  }
}
