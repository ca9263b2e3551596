import type { ClientSession } from 'mongodb';
import type { Observable } from 'rxjs';
import type { LockLostError } from './errors/lock-lost.error';
import { MongoLockError } from './errors/mongo-lock.error';
import type { LockHandle } from './lock-handle';

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
