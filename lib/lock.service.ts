import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import type {
  BeforeApplicationShutdown,
  OnApplicationShutdown,
  OnModuleInit,
} from '@nestjs/common';
import { Observable, share, throwError } from 'rxjs';
import { LockNotAcquiredError } from './errors/lock-not-acquired.error';
import { MongoLockError } from './errors/mongo-lock.error';
import { HeldLocks } from './held-locks';
import type { AcquireOptions, ForceReleaseOptions, WithLockOptions } from './interfaces';
import { requireTransactions, runInTransaction } from './lock-transaction';
import type { LockEvent, LockHolderState, LockState } from './interfaces/lock-state.interface';
import type { MongoLockModuleOptions } from './interfaces/mongo-lock-options.interface';
import { normalizeLockKeys, validateLockKey } from './keys/lock-key';
import { callback, fail, optionsObject } from './option-checks';
import { innermostHeldLock, runWithHeldLock } from './lock-context';
import type { LockHandle } from './lock-handle';
import { MONGO_LOCK_OPTIONS } from './mongo-lock.module-definition';
import {
  acquireOverrunMs,
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
import { enclosingHandle, runReentered } from './reentry';
import { runThenRelease } from './run-then-release';
import { forceReleaseFences, forceReleaseKey, releaseScopeEverywhere } from './operator-releases';
import { ServiceRuntime, type LockDiagnostics, type LockStoreFactory } from './service-runtime';
import { Leaderships } from './leadership/leaderships';
import type { Leadership, LeadershipOptions } from './leadership/leadership';
import type { LeaderTerm } from './leadership/leader-term';
import { currentLeaderTerm } from './leadership/term-context';
import { quotedKeyList, releaseFailedMessage } from './lock.messages';

export type { LockDiagnostics, LockStoreFactory } from './service-runtime';

/** Injection token of a {@link LockStoreFactory}. @internal */
export const LOCK_STORE_FACTORY = Symbol('MONGO_LOCK:STORE_FACTORY');

/**
 * Distributed locks on MongoDB: server-clock leases, fencing tokens, waits woken by one change
 * stream. In Nest, inject it; without Nest, construct it, call `start()` and finally `close()`.
 * Shuts down in Nest's two hooks: `beforeApplicationShutdown`, then `onApplicationShutdown`.
 *
 * @example
 * const locks = new LockService({ uri: 'mongodb://localhost/app' });
 * await locks.start();
 * const total = await locks.withLock(`invoices:${month}`, (lock) => closeMonth(month, lock.fence));
 * await locks.close();
 */
@Injectable()
export class LockService implements OnModuleInit, BeforeApplicationShutdown, OnApplicationShutdown {
  /** Written to the `h` field of every lock entry this instance makes. */
  readonly holderId: string;
  /**
   * Every acquisition and release on the lock collection (hot; its change stream, shared with
   * `waitForRelease`, is open while anyone subscribes). Emits nothing without change streams.
   */
  readonly events$: Observable<LockEvent>;
  private readonly options: ResolvedLockModuleOptions;
  private readonly logger = new Logger('LockService');
  private readonly held = new HeldLocks();
  private readonly runtime: ServiceRuntime;
  /** Per collection and settings; each opens its own change stream while someone waits. */
  private readonly documentLocks = new Map<string, DocumentLocks>();
  /** Metrics and traces: OpenTelemetry if installed, else a no-op. @internal */
  readonly telemetry: LockTelemetry = createLockTelemetry();
  private readonly leaderships: Leaderships;
  /** Set by Nest before any hook runs: property injection keeps the public constructor. */
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
      acquire: (key, acquireOptions, queued) =>
        this.runtime.acquire([key], {
          ...resolveAcquireOptions(acquireOptions, this.options, false),
          maxHoldMs: Number.POSITIVE_INFINITY, // held, renewed, while the instance leads
          handOff: false,
          queued,
        }),
      answerWithinMs: acquireOverrunMs(this.options.operationTimeoutMs),
      renewalIntervalRatio: Math.min(this.options.renewalIntervalRatio, 1 / 3),
      inspect: (key) => this.inspect(key),
      events$: this.events$,
      // Until the stream is established a change may pass unseen: read on a timer till then.
      eventsFlow: () => this.runtime.diagnostics().eventsFlowing,
      pollIntervalMs: this.options.maxPollIntervalMs,
      safetyPollIntervalMs: this.options.safetyPollIntervalMs,
      termBegan: (name) => this.telemetry.termBegan(name),
    });
  }

  /** The handle of the innermost lock whose function still runs here (a re-entered call's view). */
  static current(): LockHandle | undefined {
    return innermostHeldLock();
  }

  /** Inside an `@OnlyLeader` method, the term that let it run (its fence, its signal). */
  static currentTerm(): LeaderTerm | undefined {
    return currentLeaderTerm();
  }

  /**
   * Connects (creating the client from `uri` if none was given) and ensures indexes; idempotent.
   * Rejects with `InvalidLockOptionsError` if another started service here has its `holderId`.
   *
   * @example
   * const locks = new LockService({ uri: process.env.MONGODB_URI });
   * await locks.start();
   */
  async start(): Promise<void> {
    await this.runtime.ensureStarted();
  }

  /** Nest's hook: {@link start}, unless `enabled: false` (then it connects when first used). */
  async onModuleInit(): Promise<void> {
    if (!this.options.enabled) return;
    await this.start();
  }

  /**
   * Stops taking new locks (acquisitions and waits fail with `LockServiceClosedError`) and waits
   * up to `shutdownGraceMs` for locked work in flight to finish, its locks still renewed.
   */
  async beforeApplicationShutdown(): Promise<void> {
    await this.runtime.drain();
  }

  /**
   * After Nest closed the HTTP server: tells holders still running their locks are gone (`signal`,
   * `lost$`), releases them, closes the change streams, then the client if this service made it.
   */
  async onApplicationShutdown(): Promise<void> {
    await this.runtime.finish();
  }

  /** Both shutdown hooks' work, for use without Nest. */
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
      const given = optionsObject(options);
      // Only an option left undefined is not given: null is refused, as acquire refuses it.
      const timeoutMs = given.timeoutMs === undefined ? 0 : given.timeoutMs;
      return await this.acquire(keys, { ...given, timeoutMs });
    } catch (error) {
      if (error instanceof LockNotAcquiredError) return null;
      throw error;
    }
  }

  /**
   * Runs `fn` under the lock, renewed unless `renew: false`, and always releases it. `fn`'s
   * errors pass through; if `fn` succeeds but the lease was lost, rejects with `LockLostError`
   * (unless its `transaction` committed: its result is returned).
   * Re-entrant: if an enclosing `withLock` holds ALL the keys under one handle, `fn` runs at once
   * with its view of them (their fences; releases nothing). Some held keys plus others: refused.
   *
   * @example
   * await locks.withLock(`orders:${id}`, async (lock) => {
   *   await orders.ship(id, { fence: lock.fence, signal: lock.signal });
   * });
   */
  async withLock<T>(
    keys: string | string[],
    fn: (handle: LockHandle) => T | PromiseLike<T>,
    options?: WithLockOptions,
  ): Promise<T> {
    const keyList = normalizeLockKeys(keys);
    callback('fn', fn);
    const resolved = resolveAcquireOptions(options, this.options, true, ['transaction']);
    const transaction = resolveTransactionOption(options?.transaction);
    const enclosing = enclosingHandle(this, keyList, resolved.mode, transaction !== undefined);
    // The outer call's lock and transaction, seen through this call's keys (their fences).
    if (enclosing) return runReentered(this, enclosing, keyList, fn, resolved.signal);
    // Whether MongoDB has transactions is asked within the call's time, as its acquisition is.
    const first = transaction ? requireTransactions : undefined;
    const handle = await this.runtime.acquire(keyList, resolved, first);
    const run = async () => runWithHeldLock(this, handle, () => fn(handle));
    // A commit proves the lock was ours (its check's write kept others out until then), even if
    // the local lease ran out while it was on its way: the work is done, never to be retried.
    let committed = false;
    const inTransaction = (options: { maxCommitTimeMS?: number }) =>
      runInTransaction(this.runtime.transactionLocks(), handle, run, options, () => {
        committed = true;
      });
    return runThenRelease(
      handle,
      () => (transaction ? inTransaction(transaction) : run()),
      (error) => this.logger.warn(releaseFailedMessage(quotedKeyList(handle.keys), error)),
      () => committed,
    );
  }

  /**
   * Cold: acquires on subscription, emits the handle once, completes. Unsubscribing before that
   * cancels the wait and leaves nothing behind.
   *
   * @example
   * locks.acquire$('sync', { renew: true })
   *   .pipe(timeout(5_000), switchMap((lock) => from(sync().finally(() => lock.release()))))
   *   .subscribe({ error: (error) => logger.warn(error) });
   */
  acquire$(keys: string | string[], options?: AcquireOptions): Observable<LockHandle> {
    try {
      // Before the signal is linked: a bad one is the option error, not a TypeError.
      resolveAcquireOptions(options, this.options, false);
    } catch (error) {
      return throwError(() => error);
    }
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
        await this.runtime.waitForRelease(validKey, signal);
      },
      [this.runtime.closing.signal],
    );
  }

  /** The key's state by the server clock, `null` if it has no document. Never the owner token. */
  async inspect(key: string): Promise<LockState | null> {
    const validKey = validateLockKey(key);
    return (await this.runtime.started()).store.inspect(validKey);
  }

  /**
   * The lock collection's keys in key order, as {@link inspect} reports them (kept free keys
   * included; never owner tokens). `limit`: 1 to 1,000, default 100; `after`: the previous
   * page's last key.
   *
   * @example
   * const page = await locks.list({ prefix: 'orders:' });
   * const next = await locks.list({ prefix: 'orders:', after: page.at(-1)?.key });
   */
  async list(
    options: { prefix?: string; after?: string; limit?: number } = {},
  ): Promise<LockState[]> {
    const query = listLocksQuery(optionsObject(options, ['prefix', 'after', 'limit']));
    return (await this.runtime.started()).store.list(query);
  }

  /**
   * Frees a stuck key lock (never a document lock) whoever holds it, or with `fences` only those
   * holders (the ones an operator saw: one that took it since stays), in one write; resolves to
   * those released (`[]`: none held). Holders here not already releasing are told first (`signal`,
   * `lost$`; a multi-key handle loses all keys), their releases waiting for the command; holders
   * elsewhere when their instance hears it (else at their next renewal). The next fence is larger.
   *
   * @example
   * const shown = (await locks.inspect('orders:42'))?.holders.map((h) => h.fence) ?? [];
   * const released = await locks.forceRelease('orders:42', { fences: shown });
   */
  async forceRelease(key: string, options?: ForceReleaseOptions): Promise<LockHolderState[]> {
    return forceReleaseKey(this.runtime, validateLockKey(key), forceReleaseFences(options));
  }

  /**
   * Releases every lock of owner scope `scope` (`AcquireOptions.scope`) on any instance;
   * resolves to how many had a live lease. Holders here are told at once (`signal`, `lost$`);
   * holders elsewhere when their instance hears it (else at their next renewal); waiters
   * everywhere wake (those of the scope join the line again, at the back).
   *
   * @example
   * await locks.withLock('cart:42', checkout, { scope: `session:${sessionId}` });
   * // on logout:
   * await locks.releaseScope(`session:${sessionId}`);
   */
  async releaseScope(scope: string): Promise<number> {
    // `scopeName` lets undefined through (an acquisition without a scope): here it would match
    // every unscoped lock.
    const name = scopeName(scope) ?? fail('scope', 'given: a string of 1 to 200 characters', scope);
    return releaseScopeEverywhere(this.runtime, name);
  }

  /**
   * Leadership of `name`: one leader at a time, a fence per term, a signal that aborts before
   * another instance can lead. One per name; a later call with another `ttlMs` throws
   * `InvalidLockOptionsError`. Shutdown resigns first.
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
   * Locks held in a field of `collection`'s own documents, with a fenced `commit`,
   * `createIfMissing` and optimistic versions. One instance per collection and settings.
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
   * Releases every lock this instance holds now (not those acquired after the call began); each
   * holder is told first (`signal`, `lost$`): its work is no longer protected. Resolves to how
   * many leases (a key of a handle) were still live. Rejects with `LockStoreUnavailableError` if MongoDB did not
   * confirm within `operationTimeoutMs` (the releases go on; a lease not released runs out).
   */
  async releaseAllHeld(): Promise<number> {
    return this.runtime.releaseAllHeld();
  }

  /**
   * For health checks and tests: waiting callers, whether their change stream is open
   * (`streamEstablished` too, kept from 0.1) and how often it was opened (1 plus reopenings),
   * whether `events$` flows now (`eventsFlowing`), and how many locks this instance holds.
   *
   * @example
   * const { streamEstablished, held } = locks.diagnostics;
   */
  get diagnostics(): LockDiagnostics {
    return this.runtime.diagnostics();
  }
}
