import type { LineHold } from './line-handover';
import type { LineStorage } from './store/line/line-store';
import { sleep } from './util/timers';
import type { LineWaiters } from './waiting/line-waiters';

/**
 * Leaving keys' lines: a release's leave, which tells this process's waiters who holds now,
 * and the leaves sent in the background (a waiter that gave up, a give-back, an entry made
 * again by a late join), each retried until answered or until its entry's lease has ended.
 * The one owner of the leaves still under way: `close()` waits for them.
 */
export class LineLeaves {
  private readonly leaving = new Set<Promise<boolean | undefined>>();
  /** Per key, an operator command under way that the key's leaves wait for (`holdBack`). */
  private readonly heldBack = new Map<string, Promise<void>>();

  constructor(
    private readonly store: LineStorage,
    private readonly waiters: LineWaiters,
  ) {}

  /**
   * Holds back the leaves of `key` until the returned function is called: an operator command
   * that removes its holders goes first, so that no leave of ours hands the key to another
   * process whose grant the command would then remove.
   */
  holdBack(key: string): () => void {
    let done!: () => void;
    const command = new Promise<void>((resolve) => (done = resolve));
    const before = this.heldBack.get(key);
    const all = before ? Promise.all([before, command]).then(() => undefined) : command;
    this.heldBack.set(key, all);
    return () => {
      done();
      void all.then(() => {
        if (this.heldBack.get(key) === all) this.heldBack.delete(key);
      });
    };
  }

  /** Leaves the line by token; tells local waiters that now hold. False: no entry of ours. */
  async leave(key: string, token: string): Promise<boolean> {
    await this.heldBack.get(key);
    const left = await this.store.leave(key, token);
    this.waiters.heard(key, left.holders);
    return left.left;
  }

  /**
   * A leave retried until confirmed or until `until` (when the entry's lease has ended). After
   * a join with no reply (`unknown`), a leave that finds no entry may have come first: it is
   * tried again until then. Resolves once a leave is answered (whether our entry was still
   * there), or undefined when none was by then.
   */
  inBackground(
    key: string,
    token: string,
    until: number,
    entry: 'joined' | 'unknown',
  ): Promise<boolean | undefined> {
    const leave = async (): Promise<boolean | undefined> => {
      for (let delayMs = 50; performance.now() < until; delayMs = Math.min(delayMs * 2, 1_000)) {
        try {
          const left = await this.leave(key, token);
          if (left || entry === 'joined') return left;
        } catch {
          // No reply: try again.
        }
        await sleep(delayMs, false);
      }
      return undefined;
    };
    return this.track(leave());
  }

  /**
   * The entry ended (left, or by a document's commit): a join of its call still on its way,
   * whose reply the call stopped waiting for, may land after that and make the entry again,
   * nobody's. Once such joins have settled, the entry is left again, in the background.
   */
  afterLateJoins(hold: Pick<LineHold, 'key' | 'token' | 'ttlMs'>): void {
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
    // A leave that settles may start another (`afterLateJoins`).
    while (this.leaving.size > 0) await Promise.all([...this.leaving]);
  }

  private track(leaving: Promise<boolean | undefined>): Promise<boolean | undefined> {
    this.leaving.add(leaving);
    void leaving.finally(() => this.leaving.delete(leaving));
    return leaving;
  }
}
