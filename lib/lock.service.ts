import type { LockModeRequest } from './store/lock-modes';
import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import type {
  BeforeApplicationShutdown,
  OnApplicationShutdown,
  OnModuleInit,
} from '@nestjs/common';
import { setMaxListeners } from 'node:events';
import { Observable, share } from 'rxjs';
import { InvalidLockOptionsError } from './errors/invalid-lock-options.error';
import { LockNotAcquiredError } from './errors/lock-not-acquired.error';
import { LockServiceClosedError } from './errors/lock-service-closed.error';
import { MongoLockError } from './errors/mongo-lock.error';
import { HeldLocks } from './held-locks';
import type { AcquireOptions, WithLockOptions } from './interfaces/lock-options.interface';
import { requireTransactions, runInTransaction } from './lock-transaction';
import type { TransactionLocks } from './lock-transaction';
import type { LockEvent, LockHolderState, LockState } from './interfaces/lock-state.interface';
import type { MongoLockModuleOptions } from './interfaces/mongo-lock-options.interface';
import { normalizeLockKeys, validateLockKey } from './keys/lock-key';
import { heldLocksOf, innermostHeldLock, runWithHeldLock } from './lock-context';
import type { LockHandle } from './lock-handle';
import type { MongoLockHandle } from './lock-handle';
import { LockLostError } from './errors/lock-lost.error';
import { LockStoreUnavailableError } from './errors/lock-store-unavailable.error';
import {
  clientCloseUnfinishedMessage,
  duplicateHolderIdMessage,
  releasesUnconfirmedMessage,
  startTooSlowMessage,
  serviceClosedMessage,
  SHUTDOWN_REVOKE_REASON,
  shutdownGraceEndedMessage,
  wouldDeadlockMessage,
} from './lock.messages';
import { MONGO_LOCK_OPTIONS } from './mongo-lock.module-definition';
import {
  acquireOverrunMs,
  resolveAcquireOptions,
  resolveModuleOptions,
  resolveTransactionOption,
  scopeName,
} from './options';
import type { ResolvedAcquireOptions, ResolvedLockModuleOptions } from './options';
import { LockStore } from './store/lock-store';
import type { LockConnection } from './store/lock-store';
import { listLocksQuery } from './store/list-locks';
import type { KeyLineStorage } from './store/line/line-store';
import { LineLocks } from './line-locks';
import { linkAbortSignals } from './waiting/linked-abort-signal';
import { waitObservable } from './waiting/wait-observable';
import { createLockTelemetry, type LockTelemetry } from './telemetry';
import { DocumentLocks } from './documents/document-locks';
import type { DocumentLocksHost } from './documents/document-locks';
import { resolveDocumentLocksOptions } from './documents/document-input';
import type { DocumentLocksOptions } from './documents/document-locks-options.interface';
import type { Document } from 'mongodb';
import { settlesWithin } from './util/timers';
import { Leaderships } from './leadership/leaderships';
import type { Leadership, LeadershipOptions } from './leadership/leadership';
import type { LeaderTerm } from './leadership/leader-term';
import { currentLeaderTerm } from './leadership/term-context';

/**
 * What `close()` may take past the shutdown grace period: releases, the change stream and the
 * client's close, whatever MongoDB does (README, Outages: within `shutdownGraceMs` + 2 s).
 */
const CLOSE_MARGIN_MS = 1_500;

/** Holder ids of the services started in this process and not yet closed. */
const liveHolderIds = new Set<string>();

/**
 * Opens the connection a service sends its commands through. Without one, the service opens
 * the MongoDB store; `nestjs-mongo-lock/testing` provides an in-memory one under
 * {@link LOCK_STORE_FACTORY}. @internal
 */
export type LockStoreFactory = (
  options: ResolvedLockModuleOptions,
) => LockConnection | Promise<LockConnection>;

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
  /** Aborted when shutdown begins: no new locks, no new waits. */
  private readonly closing = new AbortController();
  private store: LockConnection | undefined;
  /** The locks on keys, made at start. */
  private lines: LineLocks<KeyLineStorage> | undefined;
  private starting: Promise<LockConnection> | undefined;
  private draining: Promise<void> | undefined;
  private closed: Promise<void> | undefined;
  /** The releases of the holders still running when the shutdown grace period ended. */
  private revoking: Promise<number> | undefined;
  private holderIdRegistered = false;
  private stopObservingLoad: (() => void) | undefined;
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
    // Every wait links its signal to this one for the wait's duration (and unlinks after):
    // many concurrent waits are normal, not a listener leak.
    setMaxListeners(0, this.closing.signal);
    this.events$ = this.createEvents().pipe(share());
    this.leaderships = new Leaderships({
      // A term is held while renewed, for as long as the instance leads: no maxHoldMs.
      acquire: (key, acquireOptions) =>
        this.acquireKeys([key], {
          ...resolveAcquireOptions(acquireOptions, this.options, false),
          maxHoldMs: Number.POSITIVE_INFINITY,
        }),
      inspect: (key) => this.inspect(key),
      events$: this.events$,
      // Until the stream is established a change may pass unseen: read on a timer till then.
      eventsFlow: () => this.lines?.eventsFlowing ?? false,
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
    await this.ensureStarted();
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
    this.draining ??= this.drain();
    await this.draining;
  }

  /**
   * After the HTTP server has closed: tells holders still running that their locks are gone,
   * releases them, closes the change stream, then the MongoDB client (only if this service
   * created it).
   */
  async onApplicationShutdown(): Promise<void> {
    await this.beforeApplicationShutdown();
    this.closed ??= this.finish();
    await this.closed;
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
    return this.acquireKeys(keyList, resolveAcquireOptions(options, this.options, false));
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
    const enclosing = this.enclosingHandle(keyList, resolved.mode);
    // Re-entered: the outer call's lock, and its transaction if it has one.
    if (enclosing) return await fn(enclosing);
    if (transaction) await requireTransactions(await this.ensureStarted());
    const handle = await this.acquireKeys(keyList, resolved);
    const run = () => runWithHeldLock(this, handle, () => fn(handle));
    let result: T;
    try {
      result = transaction
        ? await runInTransaction(this.transactionLocks(), handle, run, transaction)
        : await run();
    } catch (error) {
      await handle.release().catch(() => undefined);
      throw error;
    }
    try {
      await handle.release();
    } catch (error) {
      if (error instanceof LockLostError) throw error;
      // fn finished inside its lease; only the release is unconfirmed. The lease runs out by
      // itself, and the handle's signal aborts then.
      this.logger.warn(`Could not release ${JSON.stringify(handle.key)}: ${String(error)}`);
    }
    return result;
  }

  /**
   * Cold: acquires on subscription, emits the handle once, completes. Unsubscribing before
   * that cancels the wait and leaves nothing behind.
   *
   * @example
   * locks.acquire$('sync').pipe(timeout(5_000)).subscribe((lock) => sync().finally(() => lock.release()));
   */
  acquire$(keys: string | string[], options?: AcquireOptions): Observable<LockHandle> {
    return new Observable<LockHandle>((subscriber) => {
      const cancel = new AbortController();
      const linked = linkAbortSignals([options?.signal, cancel.signal]);
      this.acquire(keys, { ...options, signal: linked.signal })
        .finally(() => linked.unlink())
        .then(
          (handle) => {
            if (subscriber.closed) {
              // Won in the same instant as the unsubscription: nobody will release it.
              handle.release().catch(() => undefined);
              return;
            }
            subscriber.next(handle);
            subscriber.complete();
          },
          (error: unknown) => subscriber.error(error),
        );
      return () => cancel.abort(new MongoLockError('acquire$ was unsubscribed'));
    });
  }

  /**
   * Emits once and completes when `key` is free: released, or its lease ran out. Takes no lock.
   *
   * @example
   * await firstValueFrom(locks.waitForRelease('migrations'));
   */
  waitForRelease(key: string): Observable<void> {
    return waitObservable(async (signal) => {
      const validKey = validateLockKey(key);
      await (await this.started()).waitForRelease(validKey, signal);
    }, this.closing.signal);
  }

  /** The key's state by the server clock, or `null` if no document exists. Never the owner token. */
  async inspect(key: string): Promise<LockState | null> {
    const validKey = validateLockKey(key);
    return (await this.started()).store.inspect(validKey);
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
    return (await this.started()).store.list(query);
  }

  /**
   * Frees `key` whoever holds it, for an operator unsticking a lock: resolves to the holders
   * released (holder id, fence; never an owner token). Holders in this process are told at
   * once the command is answered (their `signal` aborts, `lost$` emits; a handle of several
   * keys loses them all);
   * holders elsewhere learn it at their next renewal, and waiters everywhere wake. The fence
   * is never reset: the next holder's is larger.
   *
   * @example
   * const released = await locks.forceRelease('orders:42');
   * logger.warn(`freed orders:42 from ${released.map((h) => h.holderId).join(', ')}`);
   */
  async forceRelease(key: string): Promise<LockHolderState[]> {
    const validKey = validateLockKey(key);
    this.lines?.beforeForceRelease(validKey);
    const { store } = await this.started();
    const endsAt = performance.now() + this.options.operationTimeoutMs;
    // The command first: a local holder's own give-back, sent before it, could hand the key to
    // a waiting process, whose grant the command would then free under it.
    const released = await store.forceRelease(validKey);
    let here: MongoLockHandle[] = [];
    const revoking = this.held
      .revokeKey(validKey, `forceRelease(${JSON.stringify(validKey)}) released it`)
      .then((handles) => (here = handles));
    await settlesWithin(revoking, endsAt - performance.now());
    // A local holder's own release may have freed its lease before the command did.
    const reported = new Set(released.map((holder) => `${holder.holderId}\0${holder.fence}`));
    for (const handle of here) {
      const fence = handle.fences.get(validKey) ?? handle.fence;
      if (reported.has(`${this.holderId}\0${fence}`)) continue;
      const scope = handle.scope === undefined ? {} : { scope: handle.scope };
      const weight = handle.permits?.held ?? 1;
      released.push({ holderId: this.holderId, fence, weight, remainingMs: 0, ...scope });
    }
    return released;
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
    const valid = scopeName(scope) as string;
    const { store } = await this.started();
    const endsAt = performance.now() + this.options.operationTimeoutMs;
    // Holders here are told at once. The one command frees every lease of the scope, theirs
    // included, so the call waits for their give-backs only within the command's bound; one
    // still retrying then goes on in the background (and is not counted).
    let here = 0;
    const revoking = this.held
      .revokeScope(valid, `releaseScope(${JSON.stringify(valid)}) released it`)
      .then((count) => (here = count));
    const there = await store.releaseScope(valid);
    await settlesWithin(revoking, endsAt - performance.now());
    return here + there;
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
    let locks = this.documentLocks.get(id);
    if (!locks)
      this.documentLocks.set(id, (locks = new DocumentLocks(this.documentHost(), settings)));
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
    const revoking = this.held.revokeAll('releaseAllHeld() released it');
    if (await settlesWithin(revoking, this.options.operationTimeoutMs)) return revoking;
    throw new LockStoreUnavailableError(
      releasesUnconfirmedMessage('releaseAllHeld()', this.options.operationTimeoutMs),
    );
  }

  /**
   * A snapshot for health checks and tests: callers waiting in this process, whether the change
   * stream that wakes them is open (`streamEstablished` says the same, kept from 0.1), how many
   * times it was opened (1, plus one per reopening after a failure) and how many locks this
   * instance holds.
   *
   * @example
   * const { streamEstablished, held } = locks.diagnostics;
   */
  get diagnostics(): {
    waiters: number;
    streamOpen: boolean;
    streamEstablished: boolean;
    streamsOpened: number;
    held: number;
  } {
    const open = this.lines?.streamOpen ?? false;
    return {
      waiters: this.lines?.waiting ?? 0,
      streamOpen: open,
      streamEstablished: open,
      streamsOpened: this.lines?.streamsOpened ?? 0,
      held: this.held.size,
    };
  }

  private documentHost(): DocumentLocksHost {
    return {
      options: this.options,
      held: this.held,
      closing: this.closing.signal,
      telemetry: this.telemetry,
      logger: {
        warn: (message: string) => this.logger.warn(message),
        error: (message: string) => this.logger.error(message),
      },
      started: async () => {
        const store = await this.ensureStarted();
        if (!(store instanceof LockStore)) {
          throw new MongoLockError(
            'Document locks need MongoDB: the in-memory store of MongoLockTestingModule has none',
          );
        }
        return store;
      },
    };
  }

  private ensureStarted(): Promise<LockConnection> {
    if (this.closing.signal.aborted) {
      return Promise.reject(new LockServiceClosedError(serviceClosedMessage()));
    }
    this.starting ??= this.connect().catch((error: unknown) => {
      this.starting = undefined;
      this.unregisterHolderId();
      throw error;
    });
    return this.starting;
  }

  private async connect(): Promise<LockConnection> {
    // Two live services with one holder id could not be told apart in lock documents.
    if (liveHolderIds.has(this.holderId)) {
      throw new InvalidLockOptionsError(duplicateHolderIdMessage(this.holderId), {
        option: 'holderId',
      });
    }
    liveHolderIds.add(this.holderId);
    this.holderIdRegistered = true;
    this.store = this.storeFactory
      ? await this.storeFactory(this.options)
      : await LockStore.open(this.options);
    this.lines = new LineLocks<KeyLineStorage>(this.store.lines(), this.held, this.options);
    await this.lines.start();
    this.stopObservingLoad = this.telemetry.observeLoad(() => ({
      waiters: this.lines?.waiting ?? 0,
      held: this.held.size,
      leading: this.leaderships.leading(),
    }));
    return this.store;
  }

  /** A hot feed of the change stream; subscribers complete when the service closes. */
  private createEvents(): Observable<LockEvent> {
    return new Observable<LockEvent>((subscriber) => {
      const onClose = () => subscriber.complete();
      if (this.closing.signal.aborted) {
        onClose();
        return undefined;
      }
      this.closing.signal.addEventListener('abort', onClose, { once: true });
      let unwatch: (() => void) | undefined;
      let unsubscribed = false;
      this.started().then(
        (lines) => {
          if (unsubscribed) return;
          unwatch = lines.watchEvents((event: LockEvent) => subscriber.next(event));
        },
        (error: unknown) => {
          if (!this.closing.signal.aborted) subscriber.error(error);
        },
      );
      return () => {
        unsubscribed = true;
        this.closing.signal.removeEventListener('abort', onClose);
        unwatch?.();
      };
    });
  }

  /** The locks on keys, once started. */
  private async started(): Promise<LineLocks<KeyLineStorage>> {
    await this.ensureStarted();
    return this.lines as LineLocks<KeyLineStorage>;
  }

  /** A lazy start counts in the call's time: {@link ensureStarted}, given up on at `endsAt`. */
  private async startedWithin(endsAt: number): Promise<LineLocks<KeyLineStorage>> {
    const starting = this.started();
    if (this.lines || (await settlesWithin(starting, endsAt - performance.now()))) return starting;
    throw new LockStoreUnavailableError(startTooSlowMessage());
  }

  /** Where locked transactions run (the client) and check their locks (the lock collection). */
  private transactionLocks(): TransactionLocks {
    const { store, lines } = this;
    if (!(store instanceof LockStore) || !lines) {
      throw new MongoLockError('Locked transactions need MongoDB: this service has no client');
    }
    return {
      client: store.client,
      confirmHeldIn: (key, token, session) => lines.store.confirmHeldIn(key, token, session),
    };
  }

  private enclosingHandle(keys: readonly string[], mode: LockModeRequest): LockHandle | undefined {
    for (const handle of heldLocksOf(this)) {
      const covered = keys.filter((key) => handle.keys.includes(key));
      if (covered.length === keys.length) {
        const lostReason = (handle as MongoLockHandle).lostReason;
        if (lostReason) throw lostReason;
        checkReentrantMode(handle, keys, mode);
        return handle;
      }
      if (covered.length > 0) throw new MongoLockError(wouldDeadlockMessage(handle.keys, keys));
    }
    return undefined;
  }

  /** Called from async methods only, so that whatever throws here rejects their promise. */
  private acquireKeys(keys: string[], options: ResolvedAcquireOptions): Promise<MongoLockHandle> {
    const startedAt = performance.now();
    return this.telemetry.acquisition(options.metricsLabel, keys.length, startedAt, async () => {
      const linked = linkAbortSignals([options.signal, this.closing.signal]);
      let lines: LineLocks<KeyLineStorage>;
      try {
        linked.signal.throwIfAborted();
        lines = await this.startedWithin(
          startedAt + options.timeoutMs + acquireOverrunMs(this.options.operationTimeoutMs),
        );
        linked.signal.throwIfAborted();
      } catch (error) {
        linked.unlink();
        throw error;
      }
      return lines.acquire(keys, options, linked.signal, startedAt).finally(() => linked.unlink());
    });
  }

  private async drain(): Promise<void> {
    const closedError = new LockServiceClosedError(serviceClosedMessage());
    this.closing.abort(closedError);
    await this.starting?.catch(() => undefined);
    // Leaders resign first, so that another instance takes over at once.
    await settlesWithin(this.leaderships.closeAll(), this.options.operationTimeoutMs);
    const drained = await this.held.drain(this.options.shutdownGraceMs);
    if (drained) return;
    this.logger.warn(shutdownGraceEndedMessage(this.held.size, this.options.shutdownGraceMs));
    // Told now, before Nest closes the HTTP server (which waits for the requests in flight): a
    // locked handler's signal aborts and its response is answered, so the app can finish.
    this.revoking = this.held.revokeAll(SHUTDOWN_REVOKE_REASON, closedError);
  }

  private async finish(): Promise<void> {
    const endsAt = performance.now() + CLOSE_MARGIN_MS;
    const remainingMs = () => endsAt - performance.now();
    // Holders still running are told at once (if the grace period did not already).
    const revoking =
      this.revoking ??
      this.held.revokeAll(
        SHUTDOWN_REVOKE_REASON,
        new LockServiceClosedError(serviceClosedMessage()),
      );
    // Closing a change stream asks MongoDB to end its cursor: bounded like the rest.
    const closingStreams = Promise.all([
      this.lines?.close(),
      ...[...this.documentLocks.values()].map((locks) => locks.close()),
    ]);
    await settlesWithin(closingStreams, remainingMs());
    this.stopObservingLoad?.();
    // Their releases, and attempts still on their way, within the margin: a MongoDB that does
    // not answer must not hold the app's shutdown. The store's close is bounded the same way.
    await settlesWithin(revoking, remainingMs());
    if (this.store && !(await settlesWithin(this.store.close(), remainingMs()))) {
      this.logger.warn(clientCloseUnfinishedMessage(CLOSE_MARGIN_MS));
    }
    this.unregisterHolderId();
  }

  private unregisterHolderId(): void {
    if (this.holderIdRegistered) liveHolderIds.delete(this.holderId);
    this.holderIdRegistered = false;
  }
}

/**
 * A re-entered lock must cover what the inner call asks: an exclusive lock covers a shared
 * request; a shared one cannot become exclusive (the call would wait for itself); a
 * semaphore's permits are the same for every caller.
 */
function checkReentrantMode(handle: LockHandle, keys: readonly string[], mode: LockModeRequest) {
  const keyList = keys.map((key) => JSON.stringify(key)).join(', ');
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
