import { isEntryMode } from '../store/lock-modes';
import type { Document, WithId } from 'mongodb';
import { Observable } from 'rxjs';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import { LockNotAcquiredError } from '../errors/lock-not-acquired.error';
import { releaseFailedMessage, startTooSlowError } from '../lock.messages';
import type { HeldLocks } from '../held-locks';
import type { LockStore } from '../store/lock-store';
import {
  documentIdOfKey,
  documentNotFound,
  keyOfDocumentId,
} from '../store/documents/document-key';
import type { ResolvedLockModuleOptions } from '../options';
import { LineLocks } from '../line-locks';
import type { MongoLockHandle } from '../lock-handle';
import type { AttemptTarget, HeldDocument, Successor } from '../store/line/line-commands';
import type { LineHold } from '../line-handover';
import { DocumentLineFields } from '../store/documents/document-line';
import { DocumentLineStore } from '../store/documents/document-line-store';
import { updateIfCurrent, writeWhileHeld } from '../store/documents/document-writes';
import type { LockState } from '../interfaces/lock-state.interface';
import { heldLocksOf, openLockedTransaction, runWithHeldLock } from '../lock-context';
import { MongoLockError } from '../errors/mongo-lock.error';
import { callback, optionsObject } from '../option-checks';
import { acquireOverrunMs, resolveAcquireOptions } from '../options';
import { openLeaseCollection } from '../store/lock-collection';
import type { DocumentUpdate, DocumentWriteTarget } from '../store/documents/document-writes';
import type { DocumentVersion } from '../store/documents/document-version';
import type { LockTelemetry } from '../telemetry';
import type { LinkedAbortSignal } from '../waiting/linked-abort-signal';
import { waitObservable } from '../waiting/wait-observable';
import { runThenRelease } from '../run-then-release';
import { outsideCaller } from '../util/outside-caller';
import { settledBy, wakeUp } from '../util/timers';
import { resolveAttemptTarget, resolveDocumentId, resolveExpectedVersion } from './document-input';
import type { ResolvedDocumentLocksOptions } from './document-input';
import { MongoDocumentLockHandle } from './document-lock-handle';
import type { DocumentLockHandle, DocumentLockWriter } from './document-lock-handle';
import type { DocumentLockOptions } from './document-locks-options.interface';
import { resolveDocumentUpdate } from './document-update-input';
import { documentNotAcquired, documentReadLate, documentSubject } from './document-lock-messages';
import { unansweredError } from '../store/bounded-command';

/** What `DocumentLocks` uses of the `LockService` that made it. */
export interface DocumentLocksHost {
  readonly options: ResolvedLockModuleOptions;
  readonly held: HeldLocks;
  /** Aborted when the service begins to shut down. */
  readonly closing: AbortSignal;
  /** A caller's signal linked with the closing signal; unlinked when the call is over. */
  link(signal: AbortSignal | undefined): LinkedAbortSignal;
  readonly telemetry: LockTelemetry;
  readonly logger: { warn(message: string): void };
  /** The started store, whose client document locks share. */
  started(): Promise<LockStore>;
}

/** What a document lock takes beyond an acquisition's options. */
const DOCUMENT_OPTION_NAMES = ['where', 'createIfMissing'];

/**
 * Locks on one collection's documents, kept in a field of each (`_lock` by default) and decided
 * by the server clock. `acquire` returns the document in the same round trip; `commit` writes
 * and unlocks in one update that lands only while the lock is ours. Get one from
 * `LockService.documents()` or inject one registered with `MongoLockModule.forFeature()`.
 *
 * @example
 * const accounts = locks.documents<Account>('accounts', { version: { field: 'version' } });
 * await accounts.withLock(id, (lock) => lock.commit({ $inc: { balance: -lock.doc.pending } }));
 */
export class DocumentLocks<T extends Document = Document> {
  /** The collection's lines, on the service's client, made on first use. */
  private lineLocks: LineLocks<DocumentLineStore> | undefined;
  /** The change stream's first opening, shared by every acquisition and wait. */
  private streamStarted: Promise<void> | undefined;

  /** Made by `LockService.documents()` and `forFeature()`; not constructed directly. @internal */
  constructor(
    private readonly host: DocumentLocksHost,
    private readonly settings: ResolvedDocumentLocksOptions,
  ) {}

  /** The collection's name. */
  get collectionName(): string {
    return this.settings.collection;
  }

  /** The version field, when one is configured. */
  get version(): DocumentVersion | undefined {
    return this.settings.version;
  }

  /**
   * Locks the document `id`, waiting up to `timeoutMs` while someone else holds it. Rejects at
   * once with `DocumentNotFoundError` when there is no such document (or it does not meet
   * `where`) and `createIfMissing` was not given; with `LockNotAcquiredError` on timeout.
   */
  async acquire(id: unknown, options?: DocumentLockOptions<T>): Promise<DocumentLockHandle<T>> {
    this.refuseInTransaction('lock');
    return this.acquireDocument(id, options, false);
  }

  /** One attempt (or a wait up to an explicit `timeoutMs`); `null` when someone else holds it. */
  async tryAcquire(
    id: unknown,
    options?: DocumentLockOptions<T>,
  ): Promise<DocumentLockHandle<T> | null> {
    try {
      const given = optionsObject(options);
      return await this.acquire(id, { ...given, timeoutMs: given.timeoutMs ?? 0 });
    } catch (error) {
      if (error instanceof LockNotAcquiredError) return null;
      throw error;
    }
  }

  /** Callers waiting in this process for a document of the collection. @internal */
  get waiting(): number {
    return this.lineLocks?.waiting() ?? 0;
  }

  /**
   * Runs `fn` under the document's lock, renewed meanwhile (unless `renew: false`), then
   * releases it, unless `fn` committed. Re-entrant within the current async context while `fn`
   * runs.
   */
  async withLock<R>(
    id: unknown,
    fn: (handle: DocumentLockHandle<T>) => R | Promise<R>,
    options?: DocumentLockOptions<T>,
  ): Promise<R> {
    this.refuseInTransaction('lock');
    const key = this.keyOf(id);
    callback('fn', fn);
    const enclosing = heldLocksOf(this).find((handle) => handle.key === key);
    if (enclosing) {
      // Not acquired again, yet the same options are refused.
      this.acquireOptions(options, true);
      const lostReason = (enclosing as MongoDocumentLockHandle<T>).lock.lostReason;
      if (lostReason) throw lostReason;
      // The enclosing lock was taken under its own conditions: check this call's too.
      if (options?.where !== undefined) await this.requireWhere(key, options);
      return await fn(enclosing as DocumentLockHandle<T>);
    }
    const handle = await this.acquireDocument(id, options, true);
    // After a commit the release resolves at once: the server confirmed it, even past the deadline.
    return runThenRelease(
      handle,
      async () => runWithHeldLock(this, handle, () => fn(handle)),
      (error) => this.host.logger.warn(releaseFailedMessage(`document ${handle.key}`, error)),
    );
  }

  /** Emits once and completes when the document is not locked (released, lease ended, or gone). */
  waitForRelease(id: unknown): Observable<void> {
    return waitObservable(
      async (signal) => {
        const key = this.keyOf(id);
        const lines = await this.lines();
        await this.streamOf(lines);
        await lines.waitForRelease(key, signal);
      },
      [this.host.closing],
    );
  }

  /**
   * The document's lock by the server clock (`key`: the id's canonical Extended JSON); `null` if
   * there is no such document.
   */
  async inspect(id: unknown): Promise<LockState | null> {
    const key = this.keyOf(id);
    this.host.closing.throwIfAborted();
    return (await this.lines()).store.inspect(key);
  }

  /**
   * Applies `update`, bumping the version in the same write, only while the version equals
   * `expectedVersion` and nobody holds the lock. Rejects with `VersionConflictError`,
   * `DocumentNotFoundError` or `DocumentLockedError` (inside a lock, use the handle's `update`).
   * Refused inside a locked transaction's work (`MongoLockError`): it would write outside it.
   */
  async updateIfCurrent(
    id: unknown,
    expectedVersion: unknown,
    update: DocumentUpdate,
  ): Promise<WithId<T>> {
    this.refuseInTransaction('updateIfCurrent');
    const key = this.keyOf(id);
    const expected = resolveExpectedVersion(expectedVersion, this.settings.version);
    const checked = resolveDocumentUpdate(update, this.settings, false) as DocumentUpdate;
    this.host.closing.throwIfAborted();
    const { store } = await this.lines();
    // resolveExpectedVersion refused a collection without a version.
    const target = this.writeTarget(store) as DocumentWriteTarget & { version: DocumentVersion };
    return (await store.send('updateIfCurrent', () =>
      updateIfCurrent(target, key, expected, checked),
    )) as WithId<T>;
  }

  /** Stops the change stream, waits (bounded) for give-backs; the client closes after. @internal */
  async close(): Promise<void> {
    await this.lineLocks?.close();
  }

  private keyOf(id: unknown): string {
    return keyOfDocumentId(resolveDocumentId(id, this.settings.idType));
  }

  /** The document `key` meets `options.where` now, else `DocumentNotFoundError`. */
  private async requireWhere(key: string, options: DocumentLockOptions<T>): Promise<void> {
    const target = resolveAttemptTarget(
      options as DocumentLockOptions,
      this.settings,
      documentIdOfKey(key),
    );
    if (!(await (await this.lines()).store.exists(key, target?.where))) {
      throw documentNotFound(key, true);
    }
  }

  /**
   * Our writes would land at once, outside a locked transaction the caller runs in: kept after
   * its abort, and made again each time the driver reruns its work.
   */
  private refuseInTransaction(what: 'lock' | 'updateIfCurrent'): void {
    if (!openLockedTransaction()) return;
    const collection = JSON.stringify(this.settings.collection);
    throw new MongoLockError(
      what === 'lock'
        ? `Document locks of ${collection} cannot be taken inside a locked transaction (withLock ` +
            'with transaction: true): their writes would not be part of it. Lock the document ' +
            "outside the transaction, or write it with the transaction's session"
        : `updateIfCurrent on ${collection} cannot run inside a locked transaction (withLock ` +
            'with transaction: true): its write would not be part of it. Write the document ' +
            "with the transaction's session, or after it",
    );
  }

  /** The lock options a document lock takes: no scope, and exclusive only. */
  private acquireOptions(options: DocumentLockOptions<T> | undefined, renewByDefault: boolean) {
    const resolved = resolveAcquireOptions(
      options,
      this.host.options,
      renewByDefault,
      DOCUMENT_OPTION_NAMES,
    );
    if (resolved.scope !== undefined) {
      throw new InvalidLockOptionsError('scope is not supported by document locks yet', {
        option: 'scope',
      });
    }
    if (isEntryMode(resolved.mode)) {
      const option = resolved.mode.permits === undefined ? 'mode' : 'permits';
      throw new InvalidLockOptionsError(
        `${option} is not supported by document locks: they are exclusive`,
        { option },
      );
    }
    return resolved;
  }

  private async acquireDocument(
    id: unknown,
    options: DocumentLockOptions<T> | undefined,
    renewByDefault: boolean,
  ): Promise<MongoDocumentLockHandle<T>> {
    const startedAt = performance.now();
    const documentId = resolveDocumentId(id, this.settings.idType);
    const key = keyOfDocumentId(documentId);
    const resolved = this.acquireOptions(options, renewByDefault);
    const target = resolveAttemptTarget(options as DocumentLockOptions, this.settings, documentId);
    const label = options?.metricsLabel ?? `${this.settings.collection}/{id}`;
    return this.host.telemetry.acquisition(label, 1, startedAt, async () => {
      const linked = this.host.link(resolved.signal);
      try {
        linked.signal.throwIfAborted();
        // As a key's: the start counts in the call's time, and close() ends the wait for it.
        const until =
          startedAt + resolved.timeoutMs + acquireOverrunMs(this.host.options.operationTimeoutMs);
        const lines = await settledBy(this.lines(), until, linked.signal, startTooSlowError);
        // The collection's change stream, for the wait's time at most: a wait before it opens
        // polls (none at once), and no news is missed after it.
        const waitEndsAt = startedAt + resolved.timeoutMs;
        await wakeUp({ heard: this.streamOf(lines) }, waitEndsAt, linked.signal, false);
        linked.signal.throwIfAborted();
        const acquired = await lines.acquireDocument(
          key,
          resolved,
          linked.signal,
          startedAt,
          target,
        );
        acquired.handle.subject = documentSubject(this.settings.collection, key);
        const bound = { until, signal: linked.signal };
        const { doc, created, next } = await this.heldDocument(
          lines.store,
          key,
          acquired,
          target,
          bound,
        );
        const writer = this.lineWriter(lines.store, next);
        return new MongoDocumentLockHandle<T>(acquired.handle, doc as WithId<T>, created, writer);
      } catch (error) {
        throw documentNotAcquired(error, this.settings.collection, key, resolved.timeoutMs);
      } finally {
        linked.unlink();
      }
    });
  }

  /** The document as our entry began to hold (read by the join, or after, within `bound`). */
  private async heldDocument(
    store: DocumentLineStore,
    key: string,
    { handle, hold }: { handle: MongoLockHandle; hold: LineHold },
    target: AttemptTarget | undefined,
    bound: { until: number; signal: AbortSignal },
  ): Promise<HeldDocument> {
    // A document a change event carried was not checked against `where`: read it instead.
    const { document } = hold;
    if (document && !(document.fromEvent && target?.where)) return document;
    const late = () => unansweredError(documentReadLate(key), store.monitorFailure());
    try {
      const reading = store.readHeld(key, hold.token, target?.where);
      const doc = await settledBy(reading, bound.until, bound.signal, late);
      if (doc) return doc;
      if (doc === null) throw documentNotFound(key, target?.where);
      // Our entry held when we heard it, with a third of its lease left: only other code
      // rewriting the lock field meanwhile gets here.
      throw new LockNotAcquiredError(
        `Document ${key}: its lock was taken from us before the document could be read`,
        { keys: [key] },
      );
    } catch (error) {
      // Given back; awaited within the call's bound only (MongoDB may be away).
      await settledBy(handle.release(), bound.until, undefined, late).catch(() => undefined);
      throw error;
    }
  }

  /** `next`: the entry behind ours when the document was read, tried first by a commit. */
  private lineWriter(
    store: DocumentLineStore,
    next: Successor | null | undefined,
  ): DocumentLockWriter {
    return {
      timeoutMs: this.host.options.operationTimeoutMs,
      check: (update, commit) => {
        const checked = resolveDocumentUpdate(update, this.settings, commit);
        // Without a commit's unlock there is nothing to send: MongoDB refuses an empty update.
        if (!commit && checked !== undefined && Object.keys(checked).length === 0) {
          throw new InvalidLockOptionsError(
            'update must change at least one field (an empty update writes nothing)',
            { option: 'update' },
          );
        }
        return checked;
      },
      // Only while our entry holds the document; a commit leaves the line in the same write.
      write: (handle, update, commit) => {
        const owner = handle.ownerOf(handle.key);
        return store.send(commit ? 'commit' : 'update', () =>
          writeWhileHeld(this.writeTarget(store), handle.key, owner, update, commit, next),
        );
      },
    };
  }

  private writeTarget(store: DocumentLineStore): DocumentWriteTarget {
    return { collection: store.collection, lock: store.fields, version: this.settings.version };
  }

  /**
   * The lines in the collection's documents, run without the in-process hand-over (a commit
   * ends the entry by its own write), made on first use.
   */
  private async lines(): Promise<LineLocks<DocumentLineStore>> {
    if (this.lineLocks) return this.lineLocks;
    const { client, serverMonitor: monitor } = await this.host.started();
    const { options } = this.host;
    const collection = openLeaseCollection<Document>(
      client,
      this.settings.dbName ?? options.dbName,
      this.settings.collection,
      options.operationTimeoutMs,
    );
    const fields = new DocumentLineFields(this.settings.lockField);
    const store = new DocumentLineStore(collection, fields, options.operationTimeoutMs, monitor);
    this.lineLocks ??= new LineLocks(store, this.host.held, { ...options, localHandOff: false });
    return this.lineLocks;
  }

  private streamOf(lines: LineLocks<DocumentLineStore>): Promise<void> {
    return (this.streamStarted ??= outsideCaller(() => lines.start()));
  }
}
