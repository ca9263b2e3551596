import type { LockHolderState, LockState } from '../interfaces/lock-state.interface';
import type { ListLocksQuery } from '../store/list-locks';
import type { ResolvedLockModuleOptions } from '../options';
import type { AcquireAttemptOutcome, AttemptTarget } from '../store/acquire-attempt';
import { EXCLUSIVE, MAX_HOLDERS_PER_KEY, isEntryMode } from '../store/lock-modes';
import type { LockModeRequest, ReservationUse } from '../store/lock-modes';
import { modeConflictError } from '../store/lock-mode-errors';
import type { OpenLockChangeStreamOptions } from '../store/lock-change-stream';
import type { LockChangeStream } from '../store/lock-document';
import type { KeyLeaseProbe, LockStore, StoreReleaseOptions } from '../store/lock-store';
import type { ReleaseResult } from '../store/release-lease';
import type { RenewLeaseOutcome } from '../store/renew-lease';
import { InMemoryChangeStream } from './in-memory-change-stream';
import type { InMemoryChangeLog } from './in-memory-change-log';
import type { InMemoryAttemptReply, InMemoryLockCollection } from './in-memory-lock-collection';

/**
 * Everything `LockStore` offers its service. `client`, `ownsClient` and engine v2's `lines` are left out: only
 * `LockStore` itself reads them. A change to the store's public contract fails to compile here.
 */
export type LockStoreContract = Omit<LockStore, 'client' | 'ownsClient' | 'lines'>;

const idOf = (key: string, owner: string) => `${owner}\0${key}`;

/**
 * One `LockService`'s connection to the in-memory lock collection: the `LockStore` contract
 * on top of it. Each command is decided when it runs, a promise turn after the call (as a
 * reply comes after the request), in call order. Commands never time out and never fail to
 * reach the collection, so there is no unknown outcome: no late win is ever reported, and a
 * give-back needs no retry.
 */
export class InMemoryLockStore implements LockStoreContract {
  /** Wins handed to a caller, who now releases them; never given back behind its back. */
  private readonly claimed = new Set<string>();
  private readonly givingBack = new Map<string, Promise<ReleaseResult | undefined>>();
  private readonly streams = new Set<InMemoryChangeStream>();
  /**
   * Never without a write: the testing store's `expire()` ends a lease behind its holder's
   * back, which the holder must find out at its `release()`, as documented.
   */
  readonly handsOverInLease: boolean = false;

  constructor(
    private readonly collection: InMemoryLockCollection,
    private readonly changes: InMemoryChangeLog,
    private readonly options: ResolvedLockModuleOptions,
    private readonly onClose: () => void,
  ) {}

  async ensureIndexes(): Promise<void> {}

  run<T>(_command: string, send: () => Promise<T>): Promise<T> {
    return send();
  }

  /** Grants across processes are MongoDB's alone: no place here goes with one. */
  async withdrawGrantedPlace(): Promise<void> {}

  /** A waiting process's reservation goes (`LockStore.withdraw`), a promise turn later. */
  withdraw(key: string, reservation: string): void {
    void this.send(() => this.collection.withdraw(key, reservation));
  }

  /** A parked waiting process keeps its place (`LockStore.keepPlace`), a promise turn later. */
  keepPlace(key: string, reservation: string): Promise<number | undefined> {
    return this.send(() => this.collection.keepPlace(key, reservation));
  }

  attempt(
    key: string,
    owner: string,
    ttlMs: number,
    _onLateWin: () => void,
    _timeoutMs?: number,
    target?: AttemptTarget,
    reservation?: string,
    // The in-memory store makes no direct grants: nothing to keep.
    _reservationUse?: ReservationUse,
  ): Promise<AcquireAttemptOutcome> {
    return this.send(() => {
      const sentAt = performance.now();
      const mode = target?.mode ?? EXCLUSIVE;
      const holder = this.options.holderId;
      const reply = this.collection.acquire({
        key,
        owner,
        holder,
        ttlMs,
        scope: target?.scope,
        mode,
        reservation,
      });
      const outcome = attemptOutcome({ key, owner, holder, mode, reservation }, reply, sentAt);
      if (outcome.won) this.claimed.add(idOf(key, owner));
      return outcome;
    });
  }

  renew(key: string, owner: string, ttlMs: number): Promise<RenewLeaseOutcome> {
    return this.send(() => {
      const sentAt = performance.now();
      const reply = this.collection.renew({ key, owner, ttlMs });
      return reply
        ? { renewed: true, sentAt, remainingMs: reply.remainingMs }
        : { renewed: false, sentAt };
    });
  }

  /** Releases by owner token and fence; makes no local transfers (the successor tries as usual). */
  release(key: string, owner: string, { fence }: StoreReleaseOptions = {}): Promise<ReleaseResult> {
    return this.send(() => {
      const outcome = this.collection.release({
        key,
        owner,
        fence,
        idleRetentionMs: this.options.idleRetentionMs,
      });
      this.claimed.delete(idOf(key, owner));
      return { outcome };
    });
  }

  giveBack(key: string, owner: string, fence?: bigint): Promise<ReleaseResult | undefined> {
    const id = idOf(key, owner);
    this.claimed.delete(id);
    const running = this.givingBack.get(id);
    if (running) return running;
    const task = this.release(key, owner, { fence }).finally(() => this.givingBack.delete(id));
    this.givingBack.set(id, task);
    return task;
  }

  forget(key: string, owner: string): void {
    this.claimed.delete(idOf(key, owner));
  }

  async giveBackUnclaimed(key: string, owner: string): Promise<ReleaseResult | undefined> {
    const id = idOf(key, owner);
    // Commands run in call order, so every attempt sent before this call has been decided.
    await this.givingBack.get(id);
    await this.send(() => undefined);
    return this.claimed.has(id) ? undefined : this.giveBack(key, owner);
  }

  /** No MongoDB, so no transactions: `transaction: true` fails with a clear error. */
  supportsTransactions(): Promise<boolean> {
    return Promise.resolve(false);
  }

  confirmHeldIn(): Promise<boolean> {
    return Promise.resolve(false);
  }

  releaseScope(scope: string): Promise<number> {
    return this.send(() => this.collection.releaseScope(scope, this.options.idleRetentionMs));
  }

  list(query: ListLocksQuery): Promise<LockState[]> {
    return this.send(() => this.collection.list(query));
  }

  forceRelease(key: string): Promise<LockHolderState[]> {
    return this.send(() => this.collection.forceRelease(key, this.options.idleRetentionMs));
  }

  inspect(key: string): Promise<LockState | null> {
    return this.send(() => this.collection.read(key).state);
  }

  probe(key: string): Promise<KeyLeaseProbe> {
    return this.send(() => {
      const sentAt = performance.now();
      const { state, operationTime } = this.collection.read(key);
      return {
        held: state?.held ?? false,
        remainingMs: state?.remainingMs ?? 0,
        sentAt,
        operationTime,
      };
    });
  }

  openChangeStream(options: OpenLockChangeStreamOptions): LockChangeStream {
    const stream = new InMemoryChangeStream(
      this.changes,
      (key) => this.collection.lookUp(key),
      options,
      (closed) => this.streams.delete(closed),
    );
    this.streams.add(stream);
    return stream;
  }

  /** Waits for the give-backs under way, then closes the streams this service left open. */
  async close(): Promise<void> {
    await Promise.all([...this.givingBack.values()]);
    await Promise.all([...this.streams].map((stream) => stream.close()));
    this.onClose();
  }

  /** Runs a command a promise turn after the call, as a reply comes after its request. */
  private send<T>(command: () => T): Promise<T> {
    return Promise.resolve().then(command);
  }
}

/**
 * `acquire-attempt.ts` (`toOutcome`): the attempt's outcome from its reply. Throws the same
 * errors: `InvalidLockOptionsError` when the key is in use in another form, and for an entry
 * mode `LockNotAcquiredError` when the key has the most holders one key can have.
 */
export function attemptOutcome(
  request: {
    key: string;
    owner: string;
    holder: string;
    mode: LockModeRequest;
    reservation?: string;
  },
  reply: InMemoryAttemptReply,
  sentAt: number,
): AcquireAttemptOutcome {
  const { key, owner, holder, mode } = request;
  if (reply.conflict) throw modeConflictError(key, mode, reply);
  const { operationTime } = reply;
  const base = { key, sentAt, operationTime };
  const entry = reply.entry;
  if (isEntryMode(mode) && entry?.owner === owner && entry.releasedAt === null) {
    const remainingMs = Math.max(0, reply.entryRemainingMs ?? 0);
    // Our entry, but its lease ended: a retry of an attempt that won long ago.
    if (remainingMs > 0) {
      return { ...base, remainingMs, won: true, holderId: holder, owner, fence: entry.fence };
    }
  }
  if (!isEntryMode(mode) && reply.owner === owner && reply.exclusiveLive) {
    const remainingMs = reply.remainingMs;
    return { ...base, remainingMs, won: true, holderId: holder, owner, fence: reply.fence };
  }
  // At the cap the key is busy: a caller that waits does so until a holder leaves or it times out.
  const atHolderCap = isEntryMode(mode) && reply.liveHolders >= MAX_HOLDERS_PER_KEY;
  return {
    ...base,
    remainingMs: Math.max(0, reply.waitMs ?? 0),
    won: false,
    holderId: reply.exclusiveLive ? reply.holder : null,
    ...(atHolderCap ? { atHolderCap } : {}),
    ...(request.reservation === undefined
      ? {}
      : { reservedMs: Math.max(0, reply.reservedMs ?? 0) }),
  };
}
