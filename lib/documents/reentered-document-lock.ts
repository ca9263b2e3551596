import type { Document, WithId } from 'mongodb';
import { ReenteredLock } from '../reentry';
import type { DocumentUpdate } from '../store/documents/document-writes';
import type { DocumentLockHandle } from './document-lock-handle';

/**
 * What a re-entered document `withLock` gets: the enclosing document lock, whose signal and
 * `lost$` also tell that the enclosing call let it go (see `ReenteredLock`). Its writes are the
 * enclosing handle's: a `commit` here unlocks the document for the enclosing call too.
 */
export class ReenteredDocumentLock<T extends Document>
  extends ReenteredLock
  implements DocumentLockHandle<T>
{
  constructor(private readonly document: DocumentLockHandle<T>) {
    super(document, document.keys);
  }

  get doc(): WithId<T> {
    return this.document.doc;
  }

  get created(): boolean {
    return this.document.created;
  }

  update(update: DocumentUpdate): Promise<WithId<T>> {
    if (this.lost) return Promise.reject(this.signal.reason as Error);
    return this.document.update(update);
  }

  commit(update?: DocumentUpdate): Promise<WithId<T>> {
    if (this.lost) return Promise.reject(this.signal.reason as Error);
    // The commit ends the lock by this call's hand, not as a let-go under it.
    this.close();
    return this.document.commit(update);
  }
}
