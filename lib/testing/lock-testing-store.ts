import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import type { LockState } from '../interfaces/lock-state.interface';
import { validateLockKey } from '../keys/lock-key';
import { newToken } from '../line-entry';
import { joinRefused } from '../line-refusals';
import { lineKind } from '../line-locks';
import { fail } from '../option-checks';
import { holderIdOption, resolveAcquireOptions, resolveModuleOptions } from '../options';
import type { ResolvedLockModuleOptions } from '../options';
import type { LineKind } from '../store/line/line-document';
import type { LockConnection } from '../store/lock-store';
import { InMemoryLineStore } from './in-memory-line-store';
import { InMemoryLines } from './in-memory-lines';

/** Options of a {@link LockTestingStore}. */
export interface LockTestingStoreOptions {
  /**
   * The store's clock (ms since the epoch), which decides every lease as MongoDB's `$$NOW`
   * does. Default `Date.now` (so Jest's modern fake timers move it too).
   */
  clock?: () => number;
}

/**
 * How {@link LockTestingStore.holdAs} holds a key: its lease, and the form of the hold as
 * `LockService.acquire` takes it (exclusive by default, `mode: 'shared'`, or a semaphore's
 * `permits` with this holder's `weight`), validated alike.
 */
export interface ForeignHoldOptions {
  /** The lease, in ms (default 30 000). */
  ttlMs?: number;
  mode?: 'exclusive' | 'shared';
  permits?: number;
  weight?: number;
}

/** What became of a release: see {@link ForeignLock.release}. */
export type ForeignReleaseOutcome = 'released' | 'expired' | 'lost';

/**
 * A lock that {@link LockTestingStore.holdAs} took for someone outside the application under
 * test (another instance of the service, another process).
 */
export interface ForeignLock {
  readonly key: string;
  readonly holderId: string;
  /** Fencing token of this acquisition. */
  readonly fence: bigint;
  /**
   * Releases it by its owner token, as its holder would: the release is streamed, so waiters
   * wake at once. `released` if the lease was live, `lost` if a holder that came after it
   * holds the key now, else `expired` (its lease had ended, or an operator freed it).
   * Repeating a successful release reports `released` again.
   */
  release(): Promise<ForeignReleaseOutcome>;
  /**
   * Renews the lease: it then ends `ttlMs` (default: the one it was taken with) from now, sooner
   * than it did if shorter; `false` if it had ended.
   */
  renew(ttlMs?: number): Promise<boolean>;
  /** Ends this lease now ({@link LockTestingStore.expire}); `false` if it had already ended. */
  expire(): boolean;
}

/** Lease of {@link LockTestingStore.holdAs} when none is given. */
const DEFAULT_FOREIGN_TTL_MS = 30_000;

/**
 * The in-memory lock collection behind `MongoLockTestingModule`: the same documents, and the
 * same decisions by the store's clock, as the MongoDB store makes (leases, owner-checked
 * renew and release, strictly increasing fences; shared holders and semaphore permits with
 * their own leases, waiters in line order, mode conflicts);
 * the same change events for acquisitions and releases. Inject it to set the scene of a test.
 *
 * One store can serve several applications of one test (give it to each `forRoot({ store })`):
 * they then behave as instances of a service sharing one MongoDB.
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

  constructor(options: LockTestingStoreOptions = {}) {
    const clock = options.clock ?? (() => Date.now());
    if (typeof clock !== 'function') {
      throw new InvalidLockOptionsError('clock must be a function returning ms since the epoch', {
        option: 'clock',
      });
    }
    this.lines = new InMemoryLines(clock);
  }

  /** The store's clock now, in ms since the epoch. */
  now(): number {
    return this.lines.clock();
  }

  /**
   * Takes `key` for `holderId`, as another instance of the service would: the application
   * under test then finds it held (`423`, `LockNotAcquiredError`, or a wait). The third
   * argument is the lease in ms, or {@link ForeignHoldOptions} (`{ mode: 'shared' }`,
   * `{ permits: 3, weight: 2 }`): a shared holder or permit holder lets others of its form in,
   * as on MongoDB. Resolves to the {@link ForeignLock}, which releases, renews or expires it.
   * Rejects with `LockNotAcquiredError` if the key is held (for a shared or permit hold: has
   * no room), with `InvalidLockOptionsError` if the key is in use in another form, and with
   * `InvalidLockOptionsError` if `holderId` is that of a `LockService` using this store (its
   * waits would then take the key for its own).
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
    const { ttlMs = DEFAULT_FOREIGN_TTL_MS } = options ?? {};
    validateForeignTtl(ttlMs);
    const kind = foreignKind(options);
    const token = newToken();
    const lines = this.lines;
    const joined = lines.join({
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
        released = lines.leave(validKey, token).left || released;
        if (released) return 'released';
        // Lost to a holder that came after us; else the lease had ended with nobody after us.
        const after = lines.inspect(validKey)?.holders.some((h) => h.fence > joined.fence);
        return after ? 'lost' : 'expired';
      },
      renew: async (renewTtlMs = ttlMs) => {
        validateForeignTtl(renewTtlMs);
        // Exactly `renewTtlMs`: a test shortens another instance's lease this way.
        return lines.renew(validKey, token, renewTtlMs, 0, true).renewed;
      },
      expire: () => lines.expire(validKey, token),
    };
  }

  /**
   * Ends the live lease on `key` now, whoever holds it (with shared holders or permit
   * holders, every one of their leases), as if it had run out while its holder stalled: the
   * key is free for the next attempt, or, with entries waiting, the first of them holds; the
   * holder's renewals and release fail by owner check, as on MongoDB. Like a lease running out
   * there, this is not streamed: the holder finds out at its next renewal (its `signal` aborts
   * then) or release (`LockLostError`); a waiter at its next look (its renewal, or the end of
   * the lease it was told of). `false` if no live lease held the key.
   *
   * @example
   * store.expire('ledger:acc-1');
   * await expect(handle.extend()).rejects.toBeInstanceOf(LockLostError);
   */
  expire(key: string): boolean {
    return this.lines.expire(validateLockKey(key));
  }

  /**
   * The key's state by the store's clock (as `LockService.inspect`), or `null` if it has no
   * document. Never the owner token.
   */
  inspect(key: string): LockState | null {
    return this.lines.inspect(validateLockKey(key));
  }

  /**
   * Opens a `LockService`'s connection. For `MongoLockTestingModule`. @internal
   */
  connect(options: ResolvedLockModuleOptions): LockConnection {
    const holderId = options.holderId;
    this.connected.set(holderId, (this.connected.get(holderId) ?? 0) + 1);
    const store = new InMemoryLineStore(this.lines, options, () => {
      const left = (this.connected.get(holderId) ?? 1) - 1;
      if (left > 0) this.connected.set(holderId, left);
      else this.connected.delete(holderId);
    });
    return store;
  }
}

/** Module options that only serve to validate a foreign hold's form as `acquire` does. */
let validationDefaults: ResolvedLockModuleOptions | undefined;

function foreignKind(options: unknown): LineKind {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidLockOptionsError(
      `holdAs takes a lease in ms or options, got ${String(options)}`,
      { option: 'options' },
    );
  }
  const { mode, permits, weight } = options as ForeignHoldOptions;
  validationDefaults ??= resolveModuleOptions({
    uri: 'mongodb://in-memory.nestjs-mongo-lock.invalid/test',
    holderId: 'lock-testing-store',
  });
  return lineKind(resolveAcquireOptions({ mode, permits, weight }, validationDefaults, false).mode);
}

function validateForeignTtl(ttlMs: unknown): void {
  if (typeof ttlMs !== 'number' || !Number.isInteger(ttlMs) || ttlMs < 1) {
    throw new InvalidLockOptionsError(`ttlMs must be a positive integer, got ${String(ttlMs)}`, {
      option: 'ttlMs',
    });
  }
}
