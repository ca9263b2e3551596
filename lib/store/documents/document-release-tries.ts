import { isStoreUnavailableError } from '../mongo-error-codes';
import type { ReleaseLeaseOutcome } from '../release-lease';

/**
 * The releases and the commit sent for one held document lock (one lease: a key, its owner
 * token and its fence), and what their replies told: whether one of them may have landed, so
 * that a release sent after it is a retry that may look for that one's success by the fences
 * (see `document-lock-release.ts`), and whether a loss reported now is known to be one.
 *
 * Kept by this process only, as long as the lock's handle holds it (see
 * {@link HeldDocumentLeases}): a release not known here goes by owner token alone.
 */
export class LeaseReleaseTries {
  /** Releases and commits sent whose reply has not come (a timed-out one may still land). */
  private sending = 0;
  /** A release or commit wrote, or failed without telling whether it did. */
  private mayHaveWritten = false;
  /** The latest reply said how the lease ended; false while one is on its way or failed. */
  private told = true;

  constructor(readonly fence: bigint) {}

  /** An earlier release or commit of this lease may have landed: the next release is a retry. */
  get mayHaveLanded(): boolean {
    return this.sending > 0 || this.mayHaveWritten;
  }

  /**
   * A loss reported now is not known to be one: a release or commit may have landed, and no
   * reply has told since (a retry that could not recognise it, or none yet).
   */
  get lossUntold(): boolean {
    return this.mayHaveLanded && !this.told;
  }

  /**
   * Sends a release: `send(true)` looks for an earlier try's success by the fences (a retry),
   * `send(false)` goes by owner token alone (the first release).
   */
  async release(
    send: (retry: boolean) => Promise<ReleaseLeaseOutcome>,
  ): Promise<ReleaseLeaseOutcome> {
    const retry = this.mayHaveLanded;
    const outcome = await this.sent(() => send(retry));
    // `lost` on a retry: gone before the first try arrived, or that try landed and is hidden.
    this.told = !(retry && outcome === 'lost');
    // `released` or `expired` freed the lock now, or an earlier try did.
    if (outcome !== 'lost') this.mayHaveWritten = true;
    return outcome;
  }

  /** Sends a commit: a write that also releases; `null` when it wrote nothing. */
  async commit<T>(send: () => Promise<T | null>): Promise<T | null> {
    const written = await this.sent(send);
    this.told = true;
    if (written !== null) this.mayHaveWritten = true;
    return written;
  }

  private async sent<T>(send: () => Promise<T>): Promise<T> {
    this.sending += 1;
    this.told = false;
    try {
      return await send();
    } catch (error) {
      // No reply, or one after the write (a write concern error): it may have landed. A
      // refusal (a validation error, a duplicate key, a bad version field) wrote nothing.
      if (isStoreUnavailableError(error)) this.mayHaveWritten = true;
      throw error;
    } finally {
      this.sending -= 1;
    }
  }
}

/** The {@link LeaseReleaseTries} of the document locks held in this process, by key and owner. */
export class HeldDocumentLeases {
  private readonly leases = new Map<string, LeaseReleaseTries>();

  /** From the moment a handle holds the lease until it holds nothing any more. */
  track(key: string, owner: string, fence: bigint): LeaseReleaseTries {
    const tries = new LeaseReleaseTries(fence);
    this.leases.set(idOf(key, owner), tries);
    return tries;
  }

  /** The lease's tries, if its handle still holds it. */
  of(key: string, owner: string, fence: bigint | undefined): LeaseReleaseTries | undefined {
    const tries = this.leases.get(idOf(key, owner));
    // One owner token serves every attempt of a call: an earlier lease of it is not this one.
    return tries && tries.fence === fence ? tries : undefined;
  }

  forget(key: string, owner: string, tries: LeaseReleaseTries): void {
    const id = idOf(key, owner);
    if (this.leases.get(id) === tries) this.leases.delete(id);
  }

  get size(): number {
    return this.leases.size;
  }
}

function idOf(key: string, owner: string): string {
  return `${key}\u0000${owner}`;
}
