import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import type { AcquireOptions } from '../interfaces/lock-options.interface';
import type { LockState } from '../interfaces/lock-state.interface';
import { validateLockKey } from '../keys/lock-key';
import { newToken } from '../line-entry';
import { joinRefused } from '../line-refusals';
import { lineKind } from '../store/lock-modes';
import {
  describeValue,
  fail,
  integer,
  optionsObject,
  refuseUnknownOptions,
} from '../option-checks';
import { MAX_TIMER_MS } from '../util/timers';
import { holderIdOption, lockMode } from '../options';
import type { ResolvedLockModuleOptions } from '../options';
import type { LineKind } from '../store/line/line-document';
import type { LockConnection } from '../store/lock-store';
import { InMemoryLineStore } from './in-memory-line-store';
import { InMemoryLines } from './in-memory-lines';

/** Options of a {@link LockTestingStore}. */
export interface LockTestingStoreOptions {
  /**
   * Clock that decides leases: ms since the epoch, or a `Date`; default `Date.now`, so fake
   * timers move it. A reading that is neither fails the call with `InvalidLockOptionsError`.
   */
  clock?: () => number | Date;
}

/**
 * How {@link LockTestingStore.holdAs} holds a key: the lease (default 30 000 ms), and the form as
 * `acquire` takes and validates it (exclusive by default, `mode: 'shared'`, or `permits` with this
 * holder's `weight`).
 */
export type ForeignHoldOptions = Pick<AcquireOptions, 'ttlMs' | 'mode' | 'permits' | 'weight'>;

/** What became of a release: see {@link ForeignLock.release}. */
export type ForeignReleaseOutcome = 'released' | 'expired' | 'lost';

/** A lock that {@link LockTestingStore.holdAs} took for another instance or process. */
export interface ForeignLock {
  readonly key: string;
  readonly holderId: string;
  /** Fencing token of this acquisition. */
  readonly fence: bigint;
  /**
   * Releases it by owner token, as its holder would (streamed: waiters wake at once). `released`
   * if the lease was live (again on a repeat), `lost` if a later holder holds the key now, else
   * `expired` (the lease had ended, or an operator freed it).
   */
  release(): Promise<ForeignReleaseOutcome>;
  /** Renews to end `ttlMs` (default: the hold's) from now, even if sooner; `false` if it ended. */
  renew(ttlMs?: number): Promise<boolean>;
  /** Ends this lease now ({@link LockTestingStore.expire}); `false` if it had already ended. */
  expire(): boolean;
}

const DEFAULT_FOREIGN_TTL_MS = 30_000;

/**
 * The in-memory lock collection behind `MongoLockTestingModule`: it decides as the MongoDB store
 * does, by its own clock (leases, owner checks, fences, shared and permit holds, line order),
 * and streams the same events. Inject it to set the scene of a test. Give one store to several
 * apps (`forRoot({ store })`) to run them as instances sharing one MongoDB.
 *
 * @example
 * const store = moduleRef.get(LockTestingStore);
 * const other = await store.holdAs('ledger:acc-1', 'other-instance'); // the app must wait now
 * store.expire('ledger:acc-1'); // the lease ends now, as if its holder had stalled
 */
export class LockTestingStore {
  private readonly lines: InMemoryLines;
  /** Holder ids of the services connected now, with how many connections each has. */
  private readonly connected = new Map<string, number>();

  constructor(options?: LockTestingStoreOptions | null) {
    const given = optionsObject(options, ['clock']);
    const clock = given.clock ?? (() => Date.now());
    if (typeof clock !== 'function') {
      fail('clock', 'a function returning ms since the epoch or a Date', clock);
    }
    this.lines = new InMemoryLines(checkedClock(clock));
  }

  /** The store's clock now, in ms since the epoch. */
  now(): number {
    return this.lines.clock();
  }

  /**
   * Takes `key` for `holderId` as another instance would, so the app under test finds it held
   * (`423`, `LockNotAcquiredError`, or a wait). The third argument is the lease in ms or
   * {@link ForeignHoldOptions}. Rejects with `LockNotAcquiredError` if the key is held (or has
   * no room for a shared or permit hold), with `InvalidLockOptionsError` if it is in use in
   * another form or `holderId` is a started `LockService` of this store (whose waits would take
   * it); before its `init()` the store does not know that id yet and takes it.
   *
   * @example
   * const other = await store.holdAs('order:42', 'billing-worker', 5_000);
   * await request(app.getHttpServer()).post('/orders/42/pay').expect(423);
   * await other.release();
   * const reader = await store.holdAs('catalogue', 'reader', { mode: 'shared' });
   */
  async holdAs(
    key: string,
    holderId: string,
    ttlOrOptions: number | ForeignHoldOptions = {},
  ): Promise<ForeignLock> {
    const validKey = validateLockKey(key);
    // As the module option is checked: what a real instance could be called.
    if (holderIdOption(holderId) === undefined) fail('holderId', 'a holder id', holderId);
    if (this.connected.has(holderId)) {
      throw new InvalidLockOptionsError(
        `holderId ${JSON.stringify(holderId)} is a LockService of this store; ` +
          'hold keys as someone else',
        { option: 'holderId' },
      );
    }
    const options = typeof ttlOrOptions === 'number' ? { ttlMs: ttlOrOptions } : ttlOrOptions;
    const ttlMs = integer('ttlMs', options?.ttlMs, 1, MAX_TIMER_MS, DEFAULT_FOREIGN_TTL_MS);
    const kind = foreignKind(options);
    const token = newToken();
    const joined = this.lines.join({
      key: validKey,
      token,
      holderId,
      ttlMs,
      kind,
      onlyIfHolds: true,
      idleRetentionMs: 0,
    });
    if (!joined.joined) throw joinRefused({ key: validKey, kind, timeoutMs: 0 }, joined);
    let released = false;
    return {
      key: validKey,
      holderId,
      fence: joined.fence,
      release: async () => {
        released = this.lines.leave(validKey, token).left || released;
        if (released) return 'released';
        // Lost to a holder that came after us; else the lease had ended with nobody after us.
        const after = this.lines.inspect(validKey)?.holders.some((h) => h.fence > joined.fence);
        return after ? 'lost' : 'expired';
      },
      renew: async (renewTtlMs?: number) => {
        const lease = integer('ttlMs', renewTtlMs, 1, MAX_TIMER_MS, ttlMs);
        // Exactly `lease`: a test shortens another instance's lease this way.
        return this.lines.renew(validKey, token, lease, 0, true).renewed;
      },
      expire: () => this.lines.expire(validKey, token),
    };
  }

  /**
   * Ends every live holder's lease on `key` now, as if it ran out while the holder stalled: the
   * key is free, or the first waiter holds. Not streamed, as on MongoDB: the holder finds out at
   * its next renewal (its `signal` aborts) or release (`LockLostError`), a waiter at its next
   * look. `false` if no live lease held the key.
   *
   * @example
   * store.expire('ledger:acc-1');
   * await expect(handle.extend()).rejects.toBeInstanceOf(LockLostError);
   */
  expire(key: string): boolean {
    return this.lines.expire(validateLockKey(key));
  }

  /** The key's state by the store's clock, as `LockService.inspect`; `null` with no document. */
  inspect(key: string): LockState | null {
    return this.lines.inspect(validateLockKey(key));
  }

  /** Opens a `LockService`'s connection, for `MongoLockTestingModule`. @internal */
  connect(options: ResolvedLockModuleOptions): LockConnection {
    const holderId = options.holderId;
    this.connected.set(holderId, (this.connected.get(holderId) ?? 0) + 1);
    return new InMemoryLineStore(this.lines, options, () => {
      const left = (this.connected.get(holderId) ?? 1) - 1;
      if (left > 0) this.connected.set(holderId, left);
      else this.connected.delete(holderId);
    });
  }
}

/**
 * `clock`, read as ms since the epoch. Each reading is checked, not the first only: a fake
 * clock's variable may be set after the store is made. Unchecked, a `NaN` would reach the
 * fences as a `RangeError`.
 */
function checkedClock(clock: () => number | Date): () => number {
  return () => {
    const reading: unknown = clock();
    const ms = reading instanceof Date ? reading.getTime() : reading;
    // A `Date` holds ±8.64e15 ms: beyond it (or not a number) no lease can be dated.
    if (typeof ms !== 'number' || Number.isNaN(new Date(ms).getTime())) {
      const got = reading instanceof Date ? 'an invalid Date' : describeValue(reading);
      const message = `clock must return ms since the epoch or a valid Date, got ${got}`;
      throw new InvalidLockOptionsError(message, { option: 'clock' });
    }
    return ms;
  };
}

/** The form `acquire` would take, checked as it checks it. */
function foreignKind(options: unknown): LineKind {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidLockOptionsError(
      `holdAs takes a lease in ms or options, got ${String(options)}`,
      { option: 'options' },
    );
  }
  refuseUnknownOptions(options, ['ttlMs', 'mode', 'permits', 'weight']);
  return lineKind(lockMode(options));
}
