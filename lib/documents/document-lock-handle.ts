import type { Document, WithId } from 'mongodb';
import type { Observable } from 'rxjs';
import { LockLostError } from '../errors/lock-lost.error';
import { MongoLockError } from '../errors/mongo-lock.error';
import type { LockHandle, MongoLockHandle } from '../lock-handle';
import type { LeaseReleaseTries } from '../store/documents/document-release-tries';
import type { DocumentUpdate } from '../store/documents/document-writes';

/**
 * A held lock on one document, with the document as it was when locked and writes that land
 * only while the lock is still ours.
 *
 * @example
 * const lock = await accounts.acquire(id);
 * await lock.commit({ $inc: { balance: -amount } }); // writes and unlocks in one update
 */
export interface DocumentLockHandle<T extends Document = Document> extends LockHandle {
  /** The document as it was when locked, read in the acquiring round trip (without the lock field). */
  readonly doc: WithId<T>;
  /** True when `createIfMissing` inserted the document. */
  readonly created: boolean;
  /**
   * Applies `update` (an update document or a pipeline) only while we still hold the lock, and
   * keeps the lock; bumps the version if one is configured. Resolves to the new document.
   * Rejects with `LockLostError`, writing nothing, once the lease is lost.
   */
  update(update: DocumentUpdate): Promise<WithId<T>>;
  /**
   * Applies `update` (if given) AND unlocks, in one write, only while we still hold the
   * lock; bumps the version when there is an update. Resolves to the new document. Rejects
   * with `LockLostError`, writing nothing, once the lease is lost.
   */
  commit(update?: DocumentUpdate): Promise<WithId<T>>;
}

/** What a document handle's writes go through (the collection's `DocumentLocks`). */
export interface DocumentLockWriter {
  update(handle: MongoLockHandle, update: unknown): Promise<Document | null>;
  commit(handle: MongoLockHandle, update: unknown): Promise<Document | null>;
  /** Throws `InvalidLockOptionsError` for an update `commit` would refuse, before anything is sent. */
  checkCommit(update: unknown): void;
  /** Tells local waiters at once that the lock was given up by a commit. */
  committed(key: string): void;
}

/**
 * Why a release tried again after an unconfirmed one reports the lock lost: the document keeps
 * no past owners, only the fence of the newest lease that ended without a release, so a later
 * such lease hides whether the first try landed (see `document-lock-release.ts`). Not for a
 * retry that found our token with the lease run out: the first try never landed, a plain loss.
 */
export function releaseOutcomeUnknownMessage(key: string, lostMessage: string): string {
  return (
    `Document ${key}: an earlier release of its lock was not confirmed by MongoDB, and the lock ` +
    'is not ours any more. Either its lease ended or another holder took it before that release ' +
    'arrived, or the release landed and the document has been locked since by a holder whose ' +
    'lease ended without a release (or other code unlocked it), which hides ours: the outcome ' +
    `cannot be told, so the lock counts as lost (${lostMessage})`
  );
}

/** The {@link DocumentLockHandle} that `DocumentLocks` hands out: a lock handle plus the document. */
export class MongoDocumentLockHandle<T extends Document> implements DocumentLockHandle<T> {
  private committing: Promise<WithId<T>> | undefined;

  constructor(
    private readonly lock: MongoLockHandle,
    readonly doc: WithId<T>,
    readonly created: boolean,
    private readonly writer: DocumentLockWriter,
    /** The lease's releases and commit, as the store sent them (see `document-release-tries.ts`). */
    private readonly tries?: LeaseReleaseTries,
  ) {}

  get key(): string {
    return this.lock.key;
  }
  /** Document locks are exclusive. */
  get mode(): 'exclusive' {
    return 'exclusive';
  }
  get permits(): undefined {
    return undefined;
  }
  get keys(): readonly string[] {
    return this.lock.keys;
  }
  get fence(): bigint {
    return this.lock.fence;
  }
  get fences(): ReadonlyMap<string, bigint> {
    return this.lock.fences;
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
  get lost(): boolean {
    return this.lock.lost;
  }
  /** Resolves once the handle holds nothing any more: released, committed, or lost. */
  get done(): Promise<void> {
    return this.lock.done;
  }
  /** The underlying lock handle (shutdown, re-entrance). @internal */
  get inner(): MongoLockHandle {
    return this.lock;
  }

  extend(ttlMs?: number): Promise<void> {
    return this.lock.extend(ttlMs);
  }

  /**
   * Gives the lock back, as {@link LockHandle.release}: by owner token. A release tried again
   * after one that MongoDB did not confirm recognises that one's success, unless the document
   * has been locked since by a holder whose lease ended without a release: it then rejects with
   * a `LockLostError` that says the outcome cannot be told.
   */
  release(): Promise<void> {
    if (this.committing) return this.committing.then(() => undefined);
    return this.lock.release().catch((error: unknown) => {
      throw this.releaseFailed(error);
    });
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }

  async update(update: DocumentUpdate): Promise<WithId<T>> {
    this.checkWritable('update');
    const written = await this.writer.update(this.lock, update);
    return this.afterWrite(written);
  }

  async commit(update?: DocumentUpdate): Promise<WithId<T>> {
    // Checked and claimed before the first await: a second commit is refused.
    if (this.committing) throw this.notWritable('commit');
    this.checkWritable('commit');
    // An update refused before anything is sent leaves the lock held and the handle usable.
    this.writer.checkCommit(update);
    this.committing = this.commitOnce(update);
    return this.committing;
  }

  private async commitOnce(update: DocumentUpdate | undefined): Promise<WithId<T>> {
    let written: Document | null;
    try {
      written = await this.writer.commit(this.lock, update);
    } catch (error) {
      // Unknown outcome: the commit may have landed, so the release that follows is a retry
      // (the store's `LeaseReleaseTries` knows), by token and fence: it either finds the
      // commit's own release (done), or frees the lock, and then the late commit, which needs
      // the lock, cannot land, or cannot tell (a later lease ended without a release, see
      // `document-lock-release.ts`) and marks the handle lost.
      // Sent, not awaited: the caller hears within one command's bound, and until the release
      // is confirmed the handle keeps its local deadline.
      void this.lock.release().catch(() => undefined);
      throw error;
    }
    if (written === null) return this.afterWrite(null);
    this.lock.releasedByWrite();
    this.writer.committed(this.lock.key);
    return written as WithId<T>;
  }

  private async afterWrite(written: Document | null): Promise<WithId<T>> {
    if (written !== null) return written as WithId<T>;
    // The lease was not ours any more when the write arrived: nothing was written. The holder
    // is told at once; the give-back of our entry goes on by itself (MongoDB may be away).
    void this.lock.revoke('its lease had ended or another holder had taken it before the write');
    throw this.lock.lostReason ?? this.notWritable('write');
  }

  /**
   * The error of a release: a loss after an unconfirmed release says it may not be one, unless
   * a reply has told since (our token found with the lease run out: a plain loss).
   */
  private releaseFailed(error: unknown): unknown {
    if (!(error instanceof LockLostError) || this.tries?.lossUntold !== true) return error;
    return new LockLostError(releaseOutcomeUnknownMessage(this.key, error.message), {
      key: error.key,
      cause: error,
    });
  }

  private checkWritable(what: string): void {
    const lostReason = this.lock.lostReason;
    if (lostReason) throw lostReason;
    if (this.lock.released || this.lock.releaseUnderWay || this.committing) {
      throw this.notWritable(what);
    }
  }

  private notWritable(what: string): MongoLockError {
    return new MongoLockError(
      `Document lock ${this.lock.key} was released or committed; it cannot ${what} any more`,
    );
  }
}
