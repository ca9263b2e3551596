import type { ClientSession } from 'mongodb';
import type { Observable } from 'rxjs';
import { InvalidLockOptionsError } from './errors/invalid-lock-options.error';
import type { LockLostError } from './errors/lock-lost.error';
import { MongoLockError } from './errors/mongo-lock.error';
import { heldLocksOf } from './lock-context';
import type { LockHandle, MongoLockHandle } from './lock-handle';
import { wouldDeadlockMessage } from './lock.messages';
import type { LockModeRequest } from './store/lock-modes';

/**
 * The enclosing handle of service `owner` in this async context holding all of `keys`, for a
 * re-entered call; undefined if none holds any. Throws for some held keys plus others (it would
 * wait for itself), a lost enclosing lock, a mode it does not cover, or (`inTransaction`) one
 * held without a transaction: work asked to run in one never runs without.
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
 * What a re-entered call gets: the enclosing lock seen through the keys the call asked for. Its
 * `key`, `keys`, `fence` and `fences` are those keys' (a fenced write must carry the fence of
 * the resource it writes); lease, `signal`, `lost$`, `session` and mode are the enclosing
 * lock's. It ends nothing: the enclosing call releases the lock when its function returns.
 */
export class ReenteredLock implements LockHandle {
  readonly key: string;
  readonly fence: bigint;
  readonly fences: ReadonlyMap<string, bigint>;

  /** `keys`: sorted, every one held by `enclosing`. */
  constructor(
    private readonly enclosing: LockHandle,
    readonly keys: readonly string[],
  ) {
    this.fences = new Map(keys.map((key) => [key, fenceOf(enclosing, key)]));
    this.key = keys[0];
    this.fence = fenceOf(enclosing, this.key);
  }

  get expiresAt(): Date {
    return this.enclosing.expiresAt;
  }

  get signal(): AbortSignal {
    return this.enclosing.signal;
  }

  get lost$(): Observable<LockLostError> {
    return this.enclosing.lost$;
  }

  get released(): boolean {
    return this.enclosing.released;
  }

  get lost(): boolean {
    return this.enclosing.lost;
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
    return this.enclosing.extend(ttlMs);
  }

  /** Releases nothing (the enclosing call does); rejects with the loss if the lock was lost. */
  release(): Promise<void> {
    if (this.enclosing.lost) return Promise.reject(this.enclosing.signal.reason as LockLostError);
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
