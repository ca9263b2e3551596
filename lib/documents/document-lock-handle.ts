import type { Document, WithId } from 'mongodb';
import type { Observable } from 'rxjs';
import { LockLostError } from '../errors/lock-lost.error';
import { LockStoreUnavailableError } from '../errors/lock-store-unavailable.error';
import { formatMs } from '../util/durations';
import { settledBy } from '../util/timers';
import { MongoLockError } from '../errors/mongo-lock.error';
import { openLockedTransaction } from '../lock-context';
import type { LockHandle, MongoLockHandle } from '../lock-handle';
import type { DocumentUpdate } from '../store/documents/document-writes';

/**
 * A held lock on one document: the document as locked, and writes that land only while the lock
 * is still ours.
 *
 * @example
 * const lock = await accounts.acquire(id);
 * await lock.commit({ $inc: { balance: -amount } }); // writes and unlocks in one update
 */
export interface DocumentLockHandle<T extends Document = Document> extends LockHandle {
  /** The document when locked, read in the acquiring round trip (without the lock field). */
  readonly doc: WithId<T>;
  /** True when `createIfMissing` inserted the document. */
  readonly created: boolean;
  /**
   * Applies `update` (an update document or a pipeline) while the lock is ours, keeping it, and
   * bumps the version if configured. Rejects with `LockLostError`, writing nothing, once lost.
   */
  update(update: DocumentUpdate): Promise<WithId<T>>;
  /**
   * Applies `update` (if given) AND unlocks, in one write, while the lock is ours; bumps the
   * version only with an update. Resolves and rejects as `update` does.
   */
  commit(update?: DocumentUpdate): Promise<WithId<T>>;
}

/** What a document handle's writes go through (the collection's `DocumentLocks`). */
export interface DocumentLockWriter {
  /** Throws `InvalidLockOptionsError` for an update refused (only `commit` may leave it out). */
  check(update: unknown, commit: boolean): DocumentUpdate | undefined;
  /** How long a commit may take, in ms (`operationTimeoutMs`), renewal in flight included. */
  readonly timeoutMs: number;
  /** Writes (and with `commit`, unlocks): `null` when the lock was not ours. */
  write(
    handle: MongoLockHandle,
    update: DocumentUpdate | undefined,
    commit: boolean,
  ): Promise<Document | null>;
}

/** The {@link DocumentLockHandle} that `DocumentLocks` hands out: a lock handle plus document. */
export class MongoDocumentLockHandle<T extends Document> implements DocumentLockHandle<T> {
  readonly key: string;
  readonly keys: readonly string[];
  readonly fence: bigint;
  readonly fences: ReadonlyMap<string, bigint>;
  readonly mode = 'exclusive';
  readonly permits = undefined;
  private committing: Promise<WithId<T>> | undefined;

  constructor(
    /** The underlying lock handle (re-entrance). @internal */
    readonly lock: MongoLockHandle,
    readonly doc: WithId<T>,
    readonly created: boolean,
    private readonly writer: DocumentLockWriter,
  ) {
    ({ key: this.key, keys: this.keys, fence: this.fence, fences: this.fences } = lock);
  }

  get expiresAt(): Date {
    return this.lock.expiresAt;
  }
  get signal(): AbortSignal {
    return this.lock.signal;
  }
  get lost$(): Observable<LockLostError> {
    return this.lock.lost$;
  }
  get released(): boolean {
    return this.lock.released;
  }
  /** @internal A release is on its way (see `MongoLockHandle.releaseUnderWay`). */
  get releaseUnderWay(): boolean {
    return this.lock.releaseUnderWay;
  }
  get lost(): boolean {
    return this.lock.lost;
  }
  get done(): Promise<void> {
    return this.lock.done;
  }

  extend(ttlMs?: number): Promise<void> {
    if (openLockedTransaction()) return Promise.reject(this.insideTransaction('be extended'));
    return this.lock.extend(ttlMs);
  }

  /**
   * As {@link LockHandle.release}; after a commit, resolves once the commit is confirmed. Refused
   * inside a locked transaction, as `update` and `commit` are.
   */
  release(): Promise<void> {
    if (this.committing) return this.committing.then(() => undefined);
    if (openLockedTransaction()) return Promise.reject(this.insideTransaction('be released'));
    return this.lock.release();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }

  async update(update: DocumentUpdate): Promise<WithId<T>> {
    this.checkWritable('update');
    const written = await this.writer.write(this.lock, this.writer.check(update, false), false);
    return this.afterWrite(written);
  }

  async commit(update?: DocumentUpdate): Promise<WithId<T>> {
    // Checked and claimed before the first await: a second commit is refused.
    if (this.committing) throw this.notWritable('commit');
    this.checkWritable('commit');
    // An update refused before anything is sent leaves the lock held and the handle usable.
    this.committing = this.commitOnce(this.writer.check(update, true));
    return this.committing;
  }

  private async commitOnce(update: DocumentUpdate | undefined): Promise<WithId<T>> {
    // One bound for the whole commit, a renewal still on its way included.
    const { timeoutMs } = this.writer;
    const until = performance.now() + timeoutMs;
    const within = formatMs(timeoutMs);
    const late = (what: string) => () =>
      new LockStoreUnavailableError(`MongoDB did not answer ${what} within ${within}`);
    let written: Document | null;
    try {
      // A renewal answered after the commit landed would find our entry gone and report a loss.
      const renewed = this.lock.stopRenewalsBeforeEnd();
      await settledBy(renewed, until, undefined, late('the renewal on its way; nothing committed'));
      // That renewal may have found the lock lost: nothing is written then.
      if (this.lock.lostReason) throw this.lock.lostReason;
      const writing = this.writer.write(this.lock, update, true);
      written = await settledBy(writing, until, undefined, late('commit; its outcome is unknown'));
    } catch (error) {
      if (error === this.lock.lostReason) throw error;
      // Outcome unknown: the commit may have landed. The release leaves our entry by token:
      // either the commit already ended it, or the release frees the lock and the late commit,
      // which needs our entry to lead, cannot land. Not awaited: the caller hears within one
      // command's bound; until the release is confirmed the handle keeps its local deadline.
      void this.lock.release().catch(() => undefined);
      throw error;
    }
    if (written === null) return this.afterWrite(null);
    this.lock.releasedByWrite();
    return written as WithId<T>;
  }

  private async afterWrite(written: Document | null): Promise<WithId<T>> {
    if (written !== null) return written as WithId<T>;
    // Not ours when the write arrived: nothing written. The holder is told at once; giving our
    // entry back goes on by itself (MongoDB may be away).
    void this.lock.revoke('its lease had ended or another holder had taken it before the write');
    throw this.lock.lostReason ?? this.notWritable('write');
  }

  private checkWritable(what: string): void {
    const lostReason = this.lock.lostReason;
    if (lostReason) throw lostReason;
    if (this.lock.released || this.lock.releaseUnderWay || this.committing) {
      throw this.notWritable(what);
    }
    if (openLockedTransaction()) {
      throw this.insideTransaction(
        what,
        "Write the document with the transaction's session, or after it",
      );
    }
  }

  /**
   * Its write would land at once, outside the transaction: kept after an abort, made again each
   * time the driver reruns the work, and made to wait for the transaction if that wrote the
   * document (which waits for the work).
   */
  private insideTransaction(what: string, advice = 'Do it after the transaction'): Error {
    if (this.lock.lostReason) return this.lock.lostReason;
    return new MongoLockError(
      `${this.lock.named} cannot ${what} inside a locked transaction (withLock with ` +
        `transaction: true): its write would not be part of it. ${advice}`,
    );
  }

  private notWritable(what: string): MongoLockError {
    return new MongoLockError(
      `${this.lock.named} was released or committed; it cannot ${what} any more`,
    );
  }
}
