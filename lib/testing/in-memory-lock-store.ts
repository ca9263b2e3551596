import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import { isEntryMode } from '../store/lock-modes';
import type { LockState } from '../interfaces/lock-state.interface';
import type { ResolvedLockModuleOptions } from '../options';
import type { AcquireAttemptOutcome, AttemptTarget } from '../store/acquire-attempt';
import type { OpenLockChangeStreamOptions } from '../store/lock-change-stream';
import type { LockChangeStream } from '../store/lock-document';
import type { KeyLeaseProbe, LockStore } from '../store/lock-store';
import type { ReleaseLeaseOutcome } from '../store/release-lease';
import type { RenewLeaseOutcome } from '../store/renew-lease';
import { InMemoryChangeStream } from './in-memory-change-stream';
import type { InMemoryChangeLog } from './in-memory-change-log';
import type { InMemoryLockCollection } from './in-memory-lock-collection';

/**
 * Everything `LockStore` offers its service. `client` and `ownsClient` are left out: only
 * `LockStore` itself reads them. A change to the store's public contract fails to compile here.
 */
export type LockStoreContract = Omit<LockStore, 'client' | 'ownsClient'>;

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
  private readonly givingBack = new Map<string, Promise<ReleaseLeaseOutcome | undefined>>();
  private readonly streams = new Set<InMemoryChangeStream>();

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

  /** Attempts here never reserve (see `attempt`): nothing to withdraw. */
  withdraw(): void {}

  attempt(
    key: string,
    owner: string,
    ttlMs: number,
    _onLateWin: () => void,
    _timeoutMs?: number,
    target?: AttemptTarget,
  ): Promise<AcquireAttemptOutcome> {
    if (target?.mode && isEntryMode(target.mode)) {
      const option = target.mode.permits === undefined ? 'mode' : 'permits';
      return Promise.reject(
        new InvalidLockOptionsError(
          `${option} is not supported by the in-memory testing store yet: test shared locks and semaphores against MongoDB`,
          { option },
        ),
      );
    }
    return this.send(() => {
      const sentAt = performance.now();
      const reply = this.collection.acquire({
        key,
        owner,
        holder: this.options.holderId,
        ttlMs,
        scope: target?.scope,
      });
      const base = {
        key,
        sentAt,
        remainingMs: reply.remainingMs,
        operationTime: reply.operationTime,
      };
      if (reply.owner !== owner) return { ...base, won: false, holderId: reply.holder };
      this.claimed.add(idOf(key, owner));
      return { ...base, won: true, holderId: this.options.holderId, owner, fence: reply.fence };
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

  release(key: string, owner: string): Promise<ReleaseLeaseOutcome> {
    return this.send(() => {
      const outcome = this.collection.release({
        key,
        owner,
        idleRetentionMs: this.options.idleRetentionMs,
      });
      this.claimed.delete(idOf(key, owner));
      return outcome;
    });
  }

  giveBack(key: string, owner: string): Promise<ReleaseLeaseOutcome | undefined> {
    const id = idOf(key, owner);
    this.claimed.delete(id);
    const running = this.givingBack.get(id);
    if (running) return running;
    const task = this.release(key, owner).finally(() => this.givingBack.delete(id));
    this.givingBack.set(id, task);
    return task;
  }

  async giveBackUnclaimed(key: string, owner: string): Promise<ReleaseLeaseOutcome | undefined> {
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
