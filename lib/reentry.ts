import type { ClientSession } from 'mongodb';
import { ReplaySubject, type Observable } from 'rxjs';
import { InvalidLockOptionsError } from './errors/invalid-lock-options.error';
import { LockLostError } from './errors/lock-lost.error';
import { MongoLockError } from './errors/mongo-lock.error';
import { heldLocksOf, letGo, openLockedTransaction, runWithHeldLock } from './lock-context';
import type { LockHandle, MongoLockHandle } from './lock-handle';
import { wouldDeadlockMessage } from './lock.messages';
import type { LockModeRequest } from './store/lock-modes';
import { checkedAtEveryLook } from './util/checked-signal';

/**
 * The enclosing handle of service `owner` in this async context holding all of `keys`, for a
 * re-entered call; undefined if none holds any. Throws for some held keys plus others (it would
 * wait for itself), a lost enclosing lock, a mode it does not cover, or (`inTransaction`) one
 * held without a transaction: work asked to run in one never runs without. A call asking for a
 * transaction of its own inside a locked transaction is refused: it would commit apart from it.
 */
export function enclosingHandle(
  owner: object,
  keys: readonly string[],
  mode: LockModeRequest,
  inTransaction = false,
): LockHandle | undefined {
  for (const handle of heldLocksOf(owner)) {
    const covered = keys.filter((key) => handle.keys.includes(key));
    if (covered.length === keys.length) {
      const lostReason = (handle as MongoLockHandle).lostReason;
      if (lostReason) throw lostReason;
      checkReentrantMode(handle, keys, mode);
      if (inTransaction && !handle.session) {
        throw new MongoLockError(
          `${quoted(keys)} already held here without a transaction: a call that re-enters it ` +
            "runs in the holder's; take the outer lock with transaction: true",
        );
      }
      return handle;
    }
    if (covered.length > 0) throw new MongoLockError(wouldDeadlockMessage(handle.keys, keys));
  }
  // Committed on its own, it would be kept after the outer one aborts, and made again at each
  // rerun of the outer work.
  if (inTransaction && openLockedTransaction()) {
    throw new MongoLockError(
      `${quoted(keys)} cannot be locked with a transaction of its own inside a locked ` +
        "transaction: it would commit apart from it. Take every key in the outer call's list",
    );
  }
  return undefined;
}

const quoted = (keys: readonly string[]) => keys.map((key) => JSON.stringify(key)).join(', ');

/**
 * An exclusive lock covers a shared request; a shared one cannot become exclusive (it would wait
 * for itself); a semaphore's permits are the same for every caller.
 */
function checkReentrantMode(handle: LockHandle, keys: readonly string[], mode: LockModeRequest) {
  const keyList = quoted(keys);
  const semaphore = mode.permits !== undefined;
  if (semaphore !== (handle.permits !== undefined)) {
    throw new InvalidLockOptionsError(
      `${keyList} already held here as ${handle.permits ? 'a semaphore' : 'a lock'}; cannot be taken as ${semaphore ? 'a semaphore' : 'a lock'}`,
      { option: semaphore ? 'permits' : 'mode' },
    );
  }
  const held = handle.permits;
  if (held && (held.of !== mode.permits || held.held < mode.weight)) {
    throw new InvalidLockOptionsError(
      `${keyList} already held here with ${held.held} of ${held.of} permits; cannot be taken with ${mode.weight} of ${mode.permits}`,
      { option: 'permits' },
    );
  }
  if (!semaphore && handle.mode === 'shared' && mode.mode === 'exclusive') {
    throw new MongoLockError(
      `${keyList} already held here in shared mode: an exclusive lock inside it would wait for itself`,
    );
  }
}

/**
 * Runs a re-entered call's `fn` under `enclosing`, seen through `keys`. Rejects with the loss if
 * the lock was lost, or let go by its enclosing call (which did not wait for this one), before
 * `fn` settled: its work was not protected to its end.
 */
export async function runReentered<T>(
  owner: object,
  enclosing: LockHandle,
  keys: readonly string[],
  fn: (handle: LockHandle) => T | PromiseLike<T>,
  signal?: AbortSignal,
): Promise<T> {
  // Given up on already, as a call outside the lock would be: the work does not run.
  signal?.throwIfAborted();
  const view = new ReenteredLock(enclosing, keys);
  try {
    const result = await runWithHeldLock(owner, enclosing, () => fn(view), view);
    if (view.lost) throw view.signal.reason;
    return result;
  } finally {
    view.close();
  }
}

/** Per enclosing lock, the signals of its re-entered calls still running. */
const runningViews = new WeakMap<LockHandle, Set<AbortController>>();

/** `enclosing`'s running views, ended with its loss or once it holds nothing (one listener). */
function viewsOf(enclosing: LockHandle): Set<AbortController> {
  const known = runningViews.get(enclosing);
  if (known) return known;
  const all = new Set<AbortController>();
  runningViews.set(enclosing, all);
  const end = (reason: unknown) => all.forEach((view) => view.abort(reason));
  enclosing.signal.addEventListener('abort', () => end(enclosing.signal.reason), { once: true });
  void (enclosing as { done?: Promise<void> }).done?.then(() => end(letGoError(enclosing)));
  return all;
}

function letGoError(enclosing: LockHandle): LockLostError {
  return new LockLostError(
    `Lock ${JSON.stringify(enclosing.key)} was released by its enclosing call while a call ` +
      'that re-entered it still ran: that work was not protected to its end',
    { key: enclosing.key },
  );
}

/**
 * What a re-entered call gets: the enclosing lock seen through the keys the call asked for. Its
 * `key`, `keys`, `fence` and `fences` are those keys' (a fenced write must carry the fence of
 * the resource it writes); lease, `session` and mode are the enclosing lock's. Its `signal`
 * and `lost$` tell the enclosing lock's loss, or that its enclosing call let the lock go.
 * It ends nothing: the enclosing call releases the lock when its function returns.
 */
export class ReenteredLock implements LockHandle {
  readonly key: string;
  readonly fence: bigint;
  readonly fences: ReadonlyMap<string, bigint>;
  private readonly ending = new AbortController();
  private readonly lostSubject = new ReplaySubject<LockLostError>(1);
  private closed = false;

  /** `keys`: sorted, every one held by `enclosing`. */
  constructor(
    private readonly enclosing: LockHandle,
    readonly keys: readonly string[],
  ) {
    this.fences = new Map(keys.map((key) => [key, fenceOf(enclosing, key)]));
    this.key = keys[0];
    this.fence = fenceOf(enclosing, this.key);
    viewsOf(enclosing).add(this.ending);
    const { signal } = this.ending;
    signal.addEventListener(
      'abort',
      () => {
        this.lostSubject.next(signal.reason as LockLostError);
        this.lostSubject.complete();
      },
      { once: true },
    );
    // Each look checks the enclosing lock's local deadline, as a look at its own signal does,
    // and whether its enclosing call let it go: a release sent may have freed the key already,
    // before `done` settles (listeners hear of it then).
    checkedAtEveryLook(this.ending.signal, () => {
      if (!enclosing.signal.aborted && !this.closed && letGo(enclosing)) {
        this.ending.abort(letGoError(enclosing));
      }
    });
  }

  /** The call's work ended: its signal no longer follows the enclosing lock. */
  close(): void {
    this.closed = true;
    viewsOf(this.enclosing).delete(this.ending);
    this.lostSubject.complete();
  }

  get expiresAt(): Date {
    return this.enclosing.expiresAt;
  }

  get signal(): AbortSignal {
    return this.ending.signal;
  }

  get lost$(): Observable<LockLostError> {
    return this.lostSubject.asObservable();
  }

  get released(): boolean {
    return this.enclosing.released;
  }

  get lost(): boolean {
    return this.ending.signal.aborted;
  }

  get session(): ClientSession | undefined {
    return this.enclosing.session;
  }

  get mode(): 'exclusive' | 'shared' {
    return this.enclosing.mode;
  }

  get permits(): { of: number; held: number } | undefined {
    return this.enclosing.permits;
  }

  /** Renews the enclosing lock: its keys share one lease. */
  extend(ttlMs?: number): Promise<void> {
    if (this.lost) return Promise.reject(this.signal.reason as LockLostError);
    return this.enclosing.extend(ttlMs);
  }

  /** Releases nothing (the enclosing call does); rejects with the loss if the lock was lost. */
  release(): Promise<void> {
    if (this.lost) return Promise.reject(this.signal.reason as LockLostError);
    return Promise.resolve();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }
}

function fenceOf(handle: LockHandle, key: string): bigint {
  const fence = handle.fences.get(key);
  if (fence === undefined)
    throw new MongoLockError(`The enclosing lock does not hold ${JSON.stringify(key)}`);
  return fence;
}
