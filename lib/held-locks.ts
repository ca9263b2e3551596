import type { MongoLockHandle } from './lock-handle';
import { settlesWithin } from './util/timers';

/** The handles of one `LockService` that hold keys; each leaves by itself once released or lost. */
export class HeldLocks {
  /** Each handle, with what it was taken through (key locks, or one collection's documents). */
  private readonly handles = new Map<MongoLockHandle, object>();
  private readonly emptyWaiters = new Set<() => void>();

  get size(): number {
    return this.handles.size;
  }

  add(handle: MongoLockHandle, takenThrough: object): void {
    this.handles.set(handle, takenThrough);
    void handle.done.then(() => {
      this.handles.delete(handle);
      if (this.handles.size > 0) return;
      for (const wake of [...this.emptyWaiters]) wake();
    });
  }

  /** Resolves `true` once no handle holds anything, or `false` after `timeoutMs`. */
  async drain(timeoutMs: number): Promise<boolean> {
    if (this.handles.size === 0) return true;
    let wake!: () => void;
    const emptied = new Promise<void>((resolve) => (wake = resolve));
    this.emptyWaiters.add(wake);
    const drained = await settlesWithin(emptied, timeoutMs);
    this.emptyWaiters.delete(wake);
    return drained;
  }

  /** Tells every holder (that passes `only`; with `cause`), then releases; how many were live. */
  async revokeAll(
    reason: string,
    cause?: unknown,
    only: (handle: MongoLockHandle) => boolean = () => true,
  ): Promise<number> {
    const handles = [...this.handles.keys()].filter(only);
    const counts = await Promise.all(handles.map((handle) => handle.revoke(reason, cause)));
    return counts.reduce((sum, count) => sum + count, 0);
  }

  holding(key: string, takenThrough: object): MongoLockHandle[] {
    return [...this.handles]
      .filter(([handle, through]) => through === takenThrough && handle.keys.includes(key))
      .map(([handle]) => handle);
  }

  /** Every key held, in the order the handles were taken. */
  keys(): string[] {
    return [...this.handles.keys()].flatMap((handle) => handle.keys);
  }

  keysOfScope(scope: string): string[] {
    return [...this.handles.keys()]
      .filter((handle) => handle.scope === scope)
      .flatMap((handle) => handle.keys);
  }

  /**
   * {@link revokeAll} for the handles taken through `takenThrough` (a lock key may equal a document
   * id's Extended JSON) that hold `key` (and pass `only`); a multi-key handle loses all. Resolves
   * to those whose release freed a live lease.
   */
  async revokeKey(
    key: string,
    takenThrough: object,
    reason: string,
    only: (handle: MongoLockHandle) => boolean = () => true,
  ): Promise<MongoLockHandle[]> {
    const holding = this.holding(key, takenThrough).filter(only);
    const counts = await Promise.all(
      holding.map((handle) => handle.revoke(reason, undefined, key)),
    );
    return holding.filter((_, index) => counts[index] > 0);
  }
}
