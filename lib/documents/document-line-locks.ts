import type { Document } from 'mongodb';
import { LockNotAcquiredError } from '../errors/lock-not-acquired.error';
import { LineLocks } from '../line-locks';
import type { MongoLockHandle } from '../lock-handle';
import type { ResolvedAcquireOptions, ResolvedLockModuleOptions } from '../options';
import type { HeldLocks } from '../held-locks';
import type { AttemptTarget } from '../store/line/line-commands';
import type { DocumentCollection } from '../store/documents/document-writes';
import { documentNotFound } from '../store/documents/document-key';
import { DocumentLineFields } from '../store/documents/document-line';
import { DocumentLineStore } from '../store/documents/document-line-store';
import { updateIfCurrent, writeWhileHeld } from '../store/documents/document-writes';
import type { DocumentUpdate, DocumentWriteTarget } from '../store/documents/document-writes';
import type { DocumentVersion } from '../store/documents/document-version';
import type { HeldDocument, Successor } from '../store/line/line-commands';

/**
 * Engine v2's document locks on one collection: a line in each document's lock field, run by
 * `LineLocks` without the in-process hand-over (a commit ends the entry by its own write).
 */
export class DocumentLineLocks {
  readonly store: DocumentLineStore;
  private readonly lines: LineLocks<DocumentLineStore>;
  /** Per owner token, the entry behind ours when the document was read (see `unlockBefore`). */
  private readonly successors = new Map<string, Successor | null>();
  private started: Promise<void> | undefined;

  constructor(
    private readonly collection: DocumentCollection,
    lockField: string,
    held: HeldLocks,
    options: ResolvedLockModuleOptions,
    private readonly version: DocumentVersion | undefined,
  ) {
    this.store = new DocumentLineStore(
      collection,
      new DocumentLineFields(lockField),
      options.operationTimeoutMs,
    );
    this.lines = new LineLocks(this.store, held, { ...options, localHandOff: false });
  }

  /** The handle, and the document as our entry began to hold (read by the join, or after). */
  async acquire(
    key: string,
    options: ResolvedAcquireOptions,
    signal: AbortSignal,
    startedAt: number,
    target: AttemptTarget | undefined,
  ): Promise<{ handle: MongoLockHandle; document: HeldDocument }> {
    await this.start();
    const { handle, hold } = await this.lines.acquireDocument(
      key,
      options,
      signal,
      startedAt,
      target,
    );
    const known = (document: HeldDocument) => {
      if (document.next !== undefined) {
        this.successors.set(hold.token, document.next);
        void handle.done.then(() => this.successors.delete(hold.token));
      }
      return { handle, document };
    };
    // A document a change event carried was not checked against `where`: read it instead.
    const { document } = hold;
    if (document && !(document.fromEvent && target?.where)) return known(document);
    let doc: HeldDocument | null | undefined;
    try {
      doc = await this.store.readHeld(key, hold.token, target?.where);
    } catch (error) {
      await handle.release().catch(() => undefined);
      throw error;
    }
    if (doc) return known(doc);
    await handle.release().catch(() => undefined);
    if (doc === null) throw documentNotFound(key, target?.where);
    // Our entry held when we heard it, with a third of its lease left: only other code
    // rewriting the lock field meanwhile gets here.
    throw new LockNotAcquiredError(
      `Document ${key}: its lock was taken from us before the document could be read`,
      { keys: [key] },
    );
  }

  async waitForRelease(key: string, signal: AbortSignal): Promise<void> {
    await this.start();
    await this.lines.waitForRelease(key, signal);
  }

  /** Writes while `owner`'s entry holds the document; with `unlock`, leaves the line too. */
  writeWhileHeld(
    key: string,
    owner: string,
    update: DocumentUpdate | undefined,
    unlock: boolean,
  ): Promise<Document | null> {
    return this.store.send(unlock ? 'commit' : 'update', () =>
      writeWhileHeld(this.writeTarget(), key, owner, update, unlock, this.successors.get(owner)),
    );
  }

  updateIfCurrent(key: string, expected: unknown, update: DocumentUpdate): Promise<Document> {
    const target = { ...this.writeTarget(), version: this.version as DocumentVersion };
    return this.store.send('updateIfCurrent', () => updateIfCurrent(target, key, expected, update));
  }

  close(): Promise<void> {
    return this.lines.close();
  }

  /** Opens the collection's change stream, once (see `LineLocks.start`). */
  private start(): Promise<void> {
    this.started ??= this.lines.start();
    return this.started;
  }

  private writeTarget(): DocumentWriteTarget {
    return { collection: this.collection, lock: this.store.fields, version: this.version };
  }
}
