import { setMaxListeners } from 'node:events';
import { Observable } from 'rxjs';
import type { DocumentLocks, DocumentLocksHost } from './documents/document-locks';
import { InvalidLockOptionsError } from './errors/invalid-lock-options.error';
import { LockServiceClosedError } from './errors/lock-service-closed.error';
import { LockStoreUnavailableError } from './errors/lock-store-unavailable.error';
import { MongoLockError } from './errors/mongo-lock.error';
import type { HeldLocks } from './held-locks';
import type { LockEvent } from './interfaces/lock-state.interface';
import { leaderNameOf } from './leadership/leader-key';
import type { Leaderships } from './leadership/leaderships';
import { LineLocks } from './line-locks';
import type { TransactionLocks } from './lock-transaction';
import {
  clientCloseUnfinishedMessage,
  duplicateHolderIdMessage,
  releasesUnconfirmedMessage,
  SERVICE_CLOSED_MESSAGE,
  SHUTDOWN_REVOKE_REASON,
  liveV1LockMessage,
  shutdownGraceEndedMessage,
  startTooSlowError,
  firstTooSlowError,
} from './lock.messages';
import { acquireOverrunMs } from './options';
import type { ResolvedAcquireOptions, ResolvedLockModuleOptions } from './options';
import type { MongoLockHandle } from './lock-handle';
import { SharedSignalLinks } from './waiting/linked-abort-signal';
import { entryFenceOf } from './store/line/line-document';
import type { KeyLineStorage } from './store/line/line-store';
import { LockStore } from './store/lock-store';
import type { LockConnection } from './store/lock-store';
import type { LockTelemetry } from './telemetry';
import { outsideCaller } from './util/outside-caller';
import { settledBy, settlesWithin, wakeUp } from './util/timers';
import { pollDelayMs } from './waiting/wait-timing';

/** Time `close()` may take past `shutdownGraceMs` (`docs/outages-and-shutdown.md`: under 2 s). */
const CLOSE_MARGIN_MS = 1_500;

/** Holder ids of the services started in this process and not yet closed. */
const liveHolderIds = new Set<string>();

const serviceClosed = () => new LockServiceClosedError(SERVICE_CLOSED_MESSAGE);

/**
 * Opens a service's connection; without one it opens the MongoDB store. `nestjs-mongo-lock/testing`
 * provides an in-memory one under `LOCK_STORE_FACTORY`. @internal
 */
export type LockStoreFactory = (
  options: ResolvedLockModuleOptions,
) => LockConnection | Promise<LockConnection>;

export interface ServiceRuntimeDeps {
  options: ResolvedLockModuleOptions;
  held: HeldLocks;
  telemetry: LockTelemetry;
  logger: { warn(message: string): void; error(message: string): void };
  leaderships: () => Leaderships;
  documentLocks: () => Iterable<DocumentLocks>;
  /** Read at the first start: Nest sets it after construction. */
  storeFactory: () => LockStoreFactory | undefined;
}

/** `LockService.diagnostics`: see there. */
export interface LockDiagnostics {
  /** Calls of this instance waiting for locks; a candidate for leadership in line is not one. */
  waiters: number;
  streamOpen: boolean;
  streamEstablished: boolean;
  streamsOpened: number;
  /** `events$` receives change events now (see `docs/observability.md`). */
  eventsFlowing: boolean;
  held: number;
}

/**
 * A `LockService`'s life: connection and key locks made at first use, and shutdown in Nest's two
 * steps (drain, then finish). Sole owner of the connection, the started state and `closing`.
 */
export class ServiceRuntime {
  /** Aborted when shutdown begins: no new locks, no new waits. */
  readonly closing = new AbortController();
  private readonly links = new SharedSignalLinks(this.closing.signal);
  private store: LockConnection | undefined;
  private keyLocks: LineLocks<KeyLineStorage> | undefined;
  private starting: Promise<LockConnection> | undefined;
  private draining: Promise<void> | undefined;
  private closed: Promise<void> | undefined;
  /** The releases of the holders still running when the shutdown grace period ended. */
  private revoking: Promise<number> | undefined;
  private holderIdRegistered = false;
  private stopObservingLoad: (() => void) | undefined;

  constructor(readonly deps: ServiceRuntimeDeps) {
    // Every wait links to it while it lasts: many listeners are normal, not a leak.
    setMaxListeners(0, this.closing.signal);
  }

  /** The locks on keys, once started. */
  get lines(): LineLocks<KeyLineStorage> | undefined {
    return this.keyLocks;
  }

  ensureStarted(): Promise<LockConnection> {
    if (this.closing.signal.aborted) return Promise.reject(serviceClosed());
    this.starting ??= outsideCaller(() => this.connect()).catch((error: unknown) => {
      this.starting = undefined;
      this.unregisterHolderId();
      throw error;
    });
    return this.starting;
  }

  async started(): Promise<LineLocks<KeyLineStorage>> {
    await this.ensureStarted();
    return this.keyLocks as LineLocks<KeyLineStorage>;
  }

  transactionLocks(): TransactionLocks {
    const { store, keyLocks } = this;
    if (!(store instanceof LockStore) || !keyLocks) {
      throw new MongoLockError('Locked transactions need MongoDB: this service has no client');
    }
    return {
      client: store.client,
      options: store.transactionOptions,
      answerWithinMs: this.deps.options.operationTimeoutMs,
      confirmHeldIn: ({ key, owner, fence }, session) =>
        keyLocks.store.confirmHeldIn(key, { t: owner, fence: entryFenceOf(fence) }, session),
      endTransactionOf: (session) => store.endTransactionOf(session),
    };
  }

  /**
   * Acquires `keys`, starting first if need be: the start counts in the call's time, given up on
   * at its end, or at once when the call is aborted or the service closes (the start goes on
   * for other callers; one on the application's client is not stopped).
   */
  acquire(
    keys: string[],
    options: ResolvedAcquireOptions,
    /** Asked of the started store first, within the call's time (a transaction's check). */
    first?: (store: LockConnection) => Promise<void>,
  ): Promise<MongoLockHandle> {
    const startedAt = performance.now();
    const { telemetry, options: settings } = this.deps;
    return telemetry.acquisition(options.metricsLabel, keys.length, startedAt, async () => {
      const linked = this.links.link(options.signal);
      try {
        linked.signal.throwIfAborted();
        const until = startedAt + options.timeoutMs + acquireOverrunMs(settings.operationTimeoutMs);
        const starting = this.started();
        const lines = this.keyLocks
          ? await starting
          : await settledBy(starting, until, linked.signal, startTooSlowError);
        if (first) {
          const asking = first(this.store as LockConnection);
          await settledBy(asking, until, linked.signal, () => firstTooSlowError(keys));
        }
        linked.signal.throwIfAborted();
        return await lines.acquire(keys, options, linked.signal, startedAt);
      } finally {
        linked.unlink();
      }
    });
  }

  documentHost(): DocumentLocksHost {
    const { options, held, telemetry, logger } = this.deps;
    return {
      options,
      held,
      closing: this.closing.signal,
      link: (signal) => this.links.link(signal),
      telemetry,
      logger,
      started: async () => {
        const store = await this.ensureStarted();
        if (store instanceof LockStore) return store;
        throw new MongoLockError(
          'Document locks need MongoDB: the in-memory store of MongoLockTestingModule has none',
        );
      },
    };
  }

  diagnostics(): LockDiagnostics {
    const lines = this.keyLocks;
    const open = lines?.streamOpen ?? false;
    return {
      waiters: this.waiting(),
      streamOpen: open,
      streamEstablished: open,
      streamsOpened: lines?.streamsOpened ?? 0,
      eventsFlowing: lines?.eventsFlowing ?? false,
      held: this.deps.held.size,
    };
  }

  /**
   * Callers waiting in this process, for keys and for documents. A candidate for leadership
   * waits in its key's line too, but is no caller waiting for a lock: `leading` reports it.
   */
  private waiting(): number {
    let waiting = this.keyLocks?.waiting((key) => leaderNameOf(key) !== undefined) ?? 0;
    for (const documents of this.deps.documentLocks()) waiting += documents.waiting;
    return waiting;
  }

  async releaseAllHeld(): Promise<number> {
    const { held, options } = this.deps;
    const revoking = held.revokeAll('releaseAllHeld() released it');
    if (await settlesWithin(revoking, options.operationTimeoutMs)) return revoking;
    throw new LockStoreUnavailableError(
      releasesUnconfirmedMessage('releaseAllHeld()', options.operationTimeoutMs),
    );
  }

  /**
   * A hot feed of the change stream; subscribers complete when the service closes. It starts the
   * service, and retries a start that MongoDB's absence failed (away at boot) until it succeeds;
   * any other failed start (a refused login, a holder id in use) errors it.
   */
  events(): Observable<LockEvent> {
    const closing = this.closing.signal;
    return new Observable<LockEvent>((subscriber) => {
      if (closing.aborted) return subscriber.complete();
      const onClose = () => subscriber.complete();
      closing.addEventListener('abort', onClose, { once: true });
      const unsubscribed = new AbortController();
      const linked = this.links.link(unsubscribed.signal);
      let unwatch: (() => void) | undefined;
      void this.startedUnlessEnded(linked.signal).then(
        (lines) => {
          // It may have left in the turn since: a watch now would outlive it.
          if (!lines || unsubscribed.signal.aborted) return;
          unwatch = lines.watchEvents((event: LockEvent) => subscriber.next(event));
        },
        (error: unknown) => subscriber.error(error),
      );
      return () => {
        unsubscribed.abort();
        linked.unlink();
        closing.removeEventListener('abort', onClose);
        unwatch?.();
      };
    });
  }

  /** Resolves once `key` is free, with no deadline: a start failing meanwhile is tried again. */
  async waitForRelease(key: string, signal: AbortSignal): Promise<void> {
    const lines = await this.startedUnlessEnded(signal);
    signal.throwIfAborted();
    await lines!.waitForRelease(key, signal);
  }

  /**
   * The key locks once started, trying again on the poll's backoff while MongoDB is unavailable;
   * undefined if `ended` first. Rejects with any other failure, which trying again would repeat.
   */
  private async startedUnlessEnded(
    ended: AbortSignal,
  ): Promise<LineLocks<KeyLineStorage> | undefined> {
    for (let failures = 0; !ended.aborted; failures += 1) {
      try {
        const lines = await this.started();
        return ended.aborted ? undefined : lines;
      } catch (error) {
        if (ended.aborted) return undefined;
        if (!(error instanceof LockStoreUnavailableError)) throw error;
      }
      await wakeUp({}, performance.now() + pollDelayMs(failures, this.deps.options), ended);
    }
    return undefined;
  }

  /** Stops taking new locks and waits, up to `shutdownGraceMs`, for locked work in flight. */
  drain(): Promise<void> {
    return (this.draining ??= this.drainOnce());
  }

  /** After {@link drain}: tells holders still running, releases, closes streams and client. */
  async finish(): Promise<void> {
    await this.drain();
    return (this.closed ??= this.finishOnce());
  }

  private async connect(): Promise<LockConnection> {
    const { options, held, telemetry } = this.deps;
    // The whole start, connection and change stream, within one operationTimeoutMs.
    const endsAt = performance.now() + options.operationTimeoutMs;
    // Two live services with one holder id could not be told apart in lock documents.
    if (liveHolderIds.has(options.holderId)) {
      throw new InvalidLockOptionsError(duplicateHolderIdMessage(options.holderId), {
        option: 'holderId',
      });
    }
    liveHolderIds.add(options.holderId);
    this.holderIdRegistered = true;
    // A close() during the start does not wait for it: the start stops, and closes what it made.
    const factory = this.deps.storeFactory();
    const opening = factory ? factory(options) : LockStore.open(options, this.closing.signal);
    const store = await Promise.resolve(opening).catch((error: unknown) => {
      throw this.closing.signal.aborted ? serviceClosed() : error;
    });
    if (this.closing.signal.aborted) {
      await store.close().catch(() => undefined);
      throw serviceClosed();
    }
    this.store = store;
    this.keyLocks = new LineLocks<KeyLineStorage>(store.lines(), held, options);
    // Sent before the stream opens, said when answered: it never fails nor holds the start.
    void store.liveV1Lock?.().then(
      (key) => key !== undefined && this.deps.logger.warn(liveV1LockMessage(key, options)),
      () => undefined,
    );
    // Not open by then: waiters poll until it carries a change.
    await this.keyLocks.start(endsAt);
    // Closed meanwhile: finish() closes the store and its stream.
    if (this.closing.signal.aborted) throw serviceClosed();
    this.stopObservingLoad = telemetry.observeLoad(() => ({
      waiters: this.waiting(),
      held: held.size,
      leading: this.deps.leaderships().leading(),
    }));
    return this.store;
  }

  private async drainOnce(): Promise<void> {
    const { options, held, logger } = this.deps;
    const closedError = serviceClosed();
    this.closing.abort(closedError);
    // Leaders resign first, so that another instance takes over at once.
    await settlesWithin(this.deps.leaderships().closeAll(), options.operationTimeoutMs);
    const drained = await held.drain(options.shutdownGraceMs);
    if (drained) return;
    logger.warn(shutdownGraceEndedMessage(held.size, options.shutdownGraceMs, held.keys()));
    // Told now, before Nest closes the HTTP server (which waits for the requests in flight): a
    // locked handler's signal aborts and its response is answered, so the app can finish.
    this.revoking = held.revokeAll(SHUTDOWN_REVOKE_REASON, closedError);
  }

  private async finishOnce(): Promise<void> {
    const endsAt = performance.now() + CLOSE_MARGIN_MS;
    const remainingMs = () => endsAt - performance.now();
    // Holders still running are told now, unless the grace period's end already did.
    const revoking =
      this.revoking ?? this.deps.held.revokeAll(SHUTDOWN_REVOKE_REASON, serviceClosed());
    // Closing a change stream asks MongoDB to end its cursor: bounded like the rest.
    const closingStreams = Promise.all([
      this.keyLocks?.close(),
      ...[...this.deps.documentLocks()].map((locks) => locks.close()),
    ]);
    await settlesWithin(closingStreams, remainingMs());
    this.stopObservingLoad?.();
    // Bounded, like the store's close: a MongoDB that does not answer must not hold the shutdown.
    await settlesWithin(revoking, remainingMs());
    if (this.store && !(await settlesWithin(this.store.close(), remainingMs()))) {
      this.deps.logger.warn(clientCloseUnfinishedMessage(CLOSE_MARGIN_MS));
    }
    this.unregisterHolderId();
  }

  private unregisterHolderId(): void {
    if (this.holderIdRegistered) liveHolderIds.delete(this.deps.options.holderId);
    this.holderIdRegistered = false;
  }
}
