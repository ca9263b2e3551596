import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import type {
  BeforeApplicationShutdown,
  OnApplicationShutdown,
  OnModuleInit,
} from '@nestjs/common';
import { Observable, share } from 'rxjs';
import { LockNotAcquiredError } from './errors/lock-not-acquired.error';
import { MongoLockError } from './errors/mongo-lock.error';
import { HeldLocks } from './held-locks';
import type { AcquireOptions, WithLockOptions } from './interfaces/lock-options.interface';
import { requireTransactions, runInTransaction } from './lock-transaction';
import type { LockEvent, LockHolderState, LockState } from './interfaces/lock-state.interface';
import type { MongoLockModuleOptions } from './interfaces/mongo-lock-options.interface';
import { normalizeLockKeys, validateLockKey } from './keys/lock-key';
import { innermostHeldLock, runWithHeldLock } from './lock-context';
import type { LockHandle } from './lock-handle';
import { MONGO_LOCK_OPTIONS } from './mongo-lock.module-definition';
import {
  resolveAcquireOptions,
  resolveModuleOptions,
  resolveTransactionOption,
  scopeName,
  type ResolvedLockModuleOptions,
} from './options';
import { listLocksQuery } from './store/list-locks';
import { waitObservable } from './waiting/wait-observable';
import { createLockTelemetry, type LockTelemetry } from './telemetry';
import { DocumentLocks } from './documents/document-locks';
import { resolveDocumentLocksOptions } from './documents/document-input';
import type { DocumentLocksOptions } from './documents/document-locks-options.interface';
import type { Document } from 'mongodb';
import { enclosingHandle } from './reentry';
import { runThenRelease } from './run-then-release';
import { forceReleaseKey, releaseScopeEverywhere } from './operator-releases';
import { ServiceRuntime, type LockDiagnostics, type LockStoreFactory } from './service-runtime';
import { Leaderships } from './leadership/leaderships';
import type { Leadership, LeadershipOptions } from './leadership/leadership';
import type { LeaderTerm } from './leadership/leader-term';
import { currentLeaderTerm } from './leadership/term-context';

export type { LockDiagnostics, LockStoreFactory } from './service-runtime';

/** Injection token of a {@link LockStoreFactory}. @internal */
export const LOCK_STORE_FACTORY = Symbol('MONGO_LOCK:STORE_FACTORY');

/**
 * Distributed locks on MongoDB: server-clock leases, fencing tokens, waits woken by one
 * change stream. Works inside Nest (inject it) and without (construct it, call `start()`,
 * and finally `close()`).
 *
 * Shutdown, in Nest's order: `beforeApplicationShutdown` stops taking new locks (new
 * acquisitions and waits fail with `LockServiceClosedError`) and lets locked work in flight
 * finish within `shutdownGraceMs`, its locks still renewed; Nest then closes the HTTP server;
 * `onApplicationShutdown` tells the holders still running that their locks are gone (signal,
 * `lost$`), releases those locks, closes the change stream and, last, the MongoDB client.
 *
 * @example
 * const locks = new LockService({ uri: 'mongodb://localhost/app' });
 * await locks.start();
 * const total = await locks.withLock(`invoices:${month}`, (lock) => closeMonth(month, lock.fence));
 * await locks.close();
 */

@Injectable()
export class LockService implements OnModuleInit, BeforeApplicationShutdown, OnApplicationShutdown {
  /** Written to the `holder` field of every lock this instance takes. */
  readonly holderId: string;
  /**
   * Every acquisition and release seen on the lock collection (hot; shares the waiters'
   * change stream, which is open while anyone subscribes). Emits nothing without change streams.
   */
  readonly events$: Observable<LockEvent>;
  private readonly options: ResolvedLockModuleOptions;
  private readonly logger = new Logger('LockService');
  private readonly held = new HeldLocks();
  /** Its connection, its locks on keys, and its shutdown. */
  private readonly runtime: ServiceRuntime;
  /** One per collection and settings: each has its own change stream, opened while someone waits. */
  private readonly documentLocks = new Map<string, DocumentLocks>();
  /** Metrics and traces: OpenTelemetry if installed, else a no-op. @internal */
  readonly telemetry: LockTelemetry = createLockTelemetry();
  /** The names this instance stands for; resigned first at shutdown. */
  private readonly leaderships: Leaderships;
  /** Set by Nest before any hook runs; the constructor's signature stays the public one. */
  @Optional()
  @Inject(LOCK_STORE_FACTORY)
  private readonly storeFactory: LockStoreFactory | undefined;

  constructor(@Inject(MONGO_LOCK_OPTIONS) options: MongoLockModuleOptions) {
    this.options = resolveModuleOptions(options);
    this.holderId = this.options.holderId;
    this.runtime = new ServiceRuntime({
      options: this.options,
      held: this.held,
      telemetry: this.telemetry,
      logger: this.logger,
      leaderships: () => this.leaderships,
      documentLocks: () => this.documentLocks.values(),
      storeFactory: () => this.storeFactory,
    });
    this.events$ = this.runtime.events().pipe(share());
    this.leaderships = new Leaderships({
      // A term is held while renewed, for as long as the instance leads: no maxHoldMs.
      acquire: (key, acquireOptions) =>
        this.runtime.acquire([key], {
          ...resolveAcquireOptions(acquireOptions, this.options, false),
          maxHoldMs: Number.POSITIVE_INFINITY,
        }),
      inspect: (key) => this.inspect(key),
      events$: this.events$,
      // Until the stream is established a change may pass unseen: read on a timer till then.
      eventsFlow: () => this.runtime.diagnostics().eventsFlowing,
      pollIntervalMs: this.options.maxPollIntervalMs,
      termBegan: (name) => this.telemetry.termBegan(name),
    });
  }

  /** The handle of the innermost lock that the current async context holds. */
  static current(): LockHandle | undefined {
    return innermostHeldLock();
  }

  /**
   * The leader term the current call runs under: inside an `@OnlyLeader` method, the term that
   * let it run (its fence for writes, its signal to stop).
   */
  static currentTerm(): LeaderTerm | undefined {
    return currentLeaderTerm();
  }

  /**
   * Connects (creating the client from `uri` if none was given) and ensures indexes.
   * Idempotent; Nest calls it on module init. Refuses a `holderId` that another started
   * service of this process uses.
   *
   * @example
   * const locks = new LockService({ uri: process.env.MONGODB_URI });
   * await locks.start();
   */
  async start(): Promise<void> {
    await this.runtime.ensureStarted();
  }

  /**
   * Nest's hook: {@link start}. With the module option `enabled: false` it does nothing: the
   * decorators need no MongoDB then, and the service connects when it is first used.
   */
  async onModuleInit(): Promise<void> {
    if (!this.options.enabled) return;
    await this.start();
  }

  /**
   * Stops taking new locks and waits, up to `shutdownGraceMs`, for locked work in flight to
   * finish (its locks are still renewed meanwhile).
   */
  async beforeApplicationShutdown(): Promise<void> {
    await this.runtime.drain();
  }

  /**
   * After the HTTP server has closed: tells holders still running that their locks are gone,
   * releases them, closes the change stream, then the MongoDB client (only if this service
   * created it).
   */
  async onApplicationShutdown(): Promise<void> {
    await this.runtime.finish();
  }

  /** Everything `beforeApplicationShutdown` and `onApplicationShutdown` do, for use without Nest. */
  async close(): Promise<void> {
    await this.onApplicationShutdown();
  }

  /**
   * Acquires `keys` (all or nothing), waiting up to `timeoutMs`. Rejects with
   * `LockNotAcquiredError` on timeout and with `signal.reason` when aborted. Does not renew
   * unless `renew` says so: release the handle yourself.
   *
   * @example
   * const lock = await locks.acquire(['accounts:1', 'accounts:2'], { timeoutMs: 2_000 });
   * try { await transfer(1, 2, lock.fences); } finally { await lock.release(); }
   */
  async acquire(keys: string | string[], options?: AcquireOptions): Promise<LockHandle> {
    const keyList = normalizeLockKeys(keys);
    return this.runtime.acquire(keyList, resolveAcquireOptions(options, this.options, false));
  }

  /**
   * One attempt (or a wait up to an explicit `timeoutMs`); `null` when the lock is held.
   *
   * @example
   * const lock = await locks.tryAcquire('nightly-report');
   * if (!lock) return; // another instance is on it
   */
  async tryAcquire(keys: string | string[], options?: AcquireOptions): Promise<LockHandle | null> {
    try {
      return await this.acquire(keys, { ...options, timeoutMs: options?.timeoutMs ?? 0 });
    } catch (error) {
      if (error instanceof LockNotAcquiredError) return null;
      throw error;
    }
  }

  /**
   * Runs `fn` under the lock, renewing it meanwhile (unless `renew: false`), and always
   * releases it. `fn`'s errors pass through unchanged; if `fn` succeeds but the lease was
   * lost meanwhile, rejects with `LockLostError`.
   *
   * Re-entrant: when the current async context (an enclosing `withLock` of this service)
   * already holds ALL the keys under one handle, `fn` runs at once with that handle, and
   * nothing is acquired or released. Asking for some held keys plus others is refused
   * (it would wait for itself).
   *
   * @example
   * await locks.withLock(`orders:${id}`, async (lock) => {
   *   await orders.ship(id, { fence: lock.fence, signal: lock.signal });
   * });
   */
  async withLock<T>(
    keys: string | string[],
    fn: (handle: LockHandle) => T | Promise<T>,
    options?: WithLockOptions,
  ): Promise<T> {
    const keyList = normalizeLockKeys(keys);
    const resolved = resolveAcquireOptions(options, this.options, true);
    const transaction = resolveTransactionOption(options?.transaction);
    const enclosing = enclosingHandle(this, keyList, resolved.mode);
    // Re-entered: the outer call's lock, and its transaction if it has one.
    if (enclosing) return await fn(enclosing);
    if (transaction) await requireTransactions(await this.runtime.ensureStarted());
    const handle = await this.runtime.acquire(keyList, resolved);
    const run = async () => runWithHeldLock(this, handle, () => fn(handle));
    return runThenRelease(
      handle,
      () =>
        transaction
          ? runInTransaction(this.runtime.transactionLocks(), handle, run, transaction)
          : run(),
      (error) =>
        this.logger.warn(`Could not release ${JSON.stringify(handle.key)}: ${String(error)}`),
    );
  }

  /**
   * Cold: acquires on subscription, emits the handle once, completes. Unsubscribing before
   * that cancels the wait and leaves nothing behind.
   *
   * @example
   * locks.acquire$('sync').pipe(timeout(5_000)).subscribe((lock) => sync().finally(() => lock.release()));
   */
  acquire$(keys: string | string[], options?: AcquireOptions): Observable<LockHandle> {
    return waitObservable(
      (signal) => this.acquire(keys, { ...options, signal }),
      [options?.signal],
      {
        reason: () => new MongoLockError('acquire$ was unsubscribed'),
        late: (handle) => void handle.release().catch(() => undefined),
      },
    );
  }

  /**
   * Emits once and completes when `key` is free: released, or its lease ran out. Takes no lock.
   *
   * @example
   * await firstValueFrom(locks.waitForRelease('migrations'));
   */
  waitForRelease(key: string): Observable<void> {
    return waitObservable(
      async (signal) => {
        const validKey = validateLockKey(key);
        await (await this.runtime.started()).waitForRelease(validKey, signal);
      },
      [this.runtime.closing.signal],
    );
  }

  /** The key's state by the server clock, or `null` if no document exists. Never the owner token. */
  async inspect(key: string): Promise<LockState | null> {
    const validKey = validateLockKey(key);
    return (await this.runtime.started()).store.inspect(validKey);
  }

  /**
   * The keys of the lock collection in key order, each as {@link inspect} reports it (free keys
   * whose document is still kept included). `limit` is 1 to 1,000 (default 100); pass the last
   * key of a page as `after` for the next one. Never the owner tokens.
   *
   * @example
   * const page = await locks.list({ prefix: 'orders:' });
   * const next = await locks.list({ prefix: 'orders:', after: page.at(-1)?.key });
   */
  async list(
    options: { prefix?: string; after?: string; limit?: number } = {},
  ): Promise<LockState[]> {
    const query = listLocksQuery(options);
    return (await this.runtime.started()).store.list(query);
  }

  /**
   * Frees the lock on `key` whoever holds it (key locks only: never a document lock), for an
   * operator unsticking a lock: resolves to the holders released (holder id, fence; never an
   * owner token). Holders in this process are told
   * before the command is sent (their `signal` aborts, `lost$` emits; a handle of several keys
   * loses them all), except one already releasing, and their releases wait for the command;
   * holders elsewhere learn it at their next renewal, and waiters everywhere wake. The fence
   * is never reset: the next holder's is larger.
   *
   * @example
   * const released = await locks.forceRelease('orders:42');
   * logger.warn(`freed orders:42 from ${released.map((h) => h.holderId).join(', ')}`);
   */
  async forceRelease(key: string): Promise<LockHolderState[]> {
    return forceReleaseKey(this.runtime, validateLockKey(key));
  }

  /**
   * Releases every lock of owner scope `scope` (`AcquireOptions.scope`), whichever instance
   * holds it, and resolves to how many were released while their lease was live. Holders in
   * this process are told at once (their `signal` aborts, `lost$` emits) and their locks
   * released by owner token; holders elsewhere learn it at their next renewal, and waiters
   * everywhere wake.
   *
   * @example
   * await locks.withLock('cart:42', checkout, { scope: `session:${sessionId}` });
   * // on logout:
   * await locks.releaseScope(`session:${sessionId}`);
   */
  async releaseScope(scope: string): Promise<number> {
    return releaseScopeEverywhere(this.runtime, scopeName(scope) as string);
  }

  /**
   * Leadership of `name`: at most one instance leads at a time, with a fence per term and a
   * signal that aborts before any other instance can lead. One per name and service; a later
   * call with another `ttlMs` is refused with `InvalidLockOptionsError`. Shutdown resigns first.
   *
   * @example
   * const term = await locks.leadership('billing').campaign();
   * await runBilling({ fence: term.fence, signal: term.signal });
   * await term.resign();
   */
  leadership(name: string, options?: LeadershipOptions): Leadership {
    return this.leaderships.get(name, options);
  }

  /** Whether this instance leads, per leadership name it stands for (health checks, metrics). */
  get leading(): ReadonlyMap<string, boolean> {
    return this.leaderships.leading();
  }

  /**
   * Locks on the documents of `collection` themselves (a field of each document holds the
   * lock), with a fenced `commit`, `createIfMissing` and optimistic versions. One instance per
   * collection and settings; its change stream is open only while someone waits.
   *
   * @example
   * const accounts = locks.documents<Account>('accounts', { version: { field: 'version' } });
   * const lock = await accounts.acquire(accountId);
   * await lock.commit({ $inc: { balance: -10 } });
   */
  documents<T extends Document = Document>(
    collection: string,
    options?: DocumentLocksOptions<T>,
  ): DocumentLocks<T> {
    const settings = resolveDocumentLocksOptions(collection, options);
    const id = JSON.stringify(settings);
    const locks =
      this.documentLocks.get(id) ?? new DocumentLocks(this.runtime.documentHost(), settings);
    this.documentLocks.set(id, locks);
    return locks as unknown as DocumentLocks<T>;
  }

  /**
   * Releases every lock this instance holds now, by owner token. Each holder is told first
   * (its `signal` aborts, `lost$` emits): work still running under it is no longer protected.
   * Resolves to how many keys were released while their lease was live; locks acquired after
   * the call began are not touched. Rejects with `LockStoreUnavailableError` if MongoDB did not
   * confirm the releases within `operationTimeoutMs` (they go on; a lease not released runs out).
   */
  async releaseAllHeld(): Promise<number> {
    return this.runtime.releaseAllHeld();
  }

  /**
   * A snapshot for health checks and tests: callers waiting in this process, whether the change
   * stream that wakes them is open (`streamEstablished` says the same, kept from 0.1), how many
   * times it was opened (1, plus one per reopening after a failure), whether `events$` receives
   * change events now (`eventsFlowing`) and how many locks this instance holds.
   *
   * @example
   * const { streamEstablished, held } = locks.diagnostics;
   */
  get diagnostics(): LockDiagnostics {
    return this.runtime.diagnostics();
  }
}
