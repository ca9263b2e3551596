import type { LockEvent, LockHolderState, LockState } from '../interfaces/lock-state.interface';
import type { ListLocksQuery } from '../store/list-locks';
import type {
  JoinRequest,
  JoinResult,
  LeaveResult,
  RenewResult,
} from '../store/line/line-commands';
import type { LinePlace } from '../store/line/line-document';
import { leadPattern, lineChangeOf } from '../store/line/line-events';
import type { LineChange, LineWatch } from '../store/line/line-events';
import { lineEvents } from '../store/line/line-state';
import type { KeyLineStorage, LineStoreSettings } from '../store/line/line-store';
import type { InMemoryLines } from './in-memory-lines';
import type { LockConnection } from '../store/lock-store';
import type { ScopeHoldersRemoved } from '../store/line/line-admin';

/**
 * One `LockService`'s connection to {@link InMemoryLines}, as engine v2's `LineStore`. Commands
 * are decided a promise turn after the call, in call order, and always answered (no unknown
 * outcome). Watches hear what change streams would, through the store's filter and decoders.
 */
export class InMemoryLineStore implements KeyLineStorage, LockConnection {
  private readonly unsubscribes = new Set<() => void>();
  private closed = false;

  constructor(
    private readonly memory: InMemoryLines,
    private readonly settings: Pick<LineStoreSettings, 'idleRetentionMs'>,
    private readonly onClose: () => void,
  ) {}

  /** The service's engine v2 collection: this connection. */
  lines(): this {
    return this;
  }

  join(request: Omit<JoinRequest, 'idleRetentionMs'>): Promise<JoinResult> {
    const idleRetentionMs = this.settings.idleRetentionMs;
    return this.send(() => this.memory.join({ ...request, idleRetentionMs }));
  }

  leave(key: string, token: string): Promise<LeaveResult> {
    return this.send(() => this.memory.leave(key, token));
  }

  renew(key: string, token: string, ttlMs: number, exactly = false): Promise<RenewResult> {
    const { idleRetentionMs } = this.settings;
    return this.send(() => this.memory.renew(key, token, ttlMs, idleRetentionMs, exactly));
  }

  place(key: string, token: string): Promise<LinePlace | undefined> {
    return this.send(() => this.memory.place(key, token));
  }

  inspect(key: string): Promise<LockState | null> {
    return this.send(() => this.memory.inspect(key));
  }

  list(query: ListLocksQuery): Promise<LockState[]> {
    return this.send(() => this.memory.list(query));
  }

  forceRelease(key: string, fences?: readonly bigint[]): Promise<LockHolderState[]> {
    return this.send(() => this.memory.forceRelease(key, this.settings.idleRetentionMs, fences));
  }

  releaseScope(scope: string): Promise<ScopeHoldersRemoved[]> {
    return this.send(() => this.memory.releaseScope(scope, this.settings.idleRetentionMs));
  }

  /** No MongoDB, so no transactions: `transaction: true` fails with a clear error. */
  transactionsRefusal(): Promise<string | undefined> {
    return Promise.resolve('the in-memory store of MongoLockTestingModule has none');
  }

  confirmHeldIn(): Promise<boolean> {
    return Promise.resolve(false);
  }

  /** The changes `watchLines` lets through for `holderId`: a `lead` naming it, or everyone. */
  watch(
    holderId: string,
    onChange: (change: LineChange) => void,
    _onFailure?: unknown,
    onOpen?: () => void,
  ): LineWatch {
    const leads = new RegExp(leadPattern(holderId));
    return this.listen(onOpen, (event) => {
      if (event.operationType !== 'update') return;
      const lead = (event.updateDescription.updatedFields as { lead?: unknown } | undefined)?.lead;
      if (typeof lead !== 'string' || !leads.test(lead)) return;
      const change = lineChangeOf(event);
      if (change) onChange(change);
    });
  }

  watchEvents(
    onEvent: (event: LockEvent) => void,
    _onFailure?: unknown,
    onOpen?: () => void,
  ): LineWatch {
    return this.listen(onOpen, (event) => {
      for (const lockEvent of lineEvents(event)) onEvent(lockEvent);
    });
  }

  /** Ends this connection's watches; once. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const unsubscribe of [...this.unsubscribes]) unsubscribe();
    this.onClose();
  }

  /** Open at once (it never fails); each change arrives a promise turn after its write. */
  private listen(
    onOpen: (() => void) | undefined,
    deliver: Parameters<InMemoryLines['subscribe']>[0],
  ): LineWatch {
    const unsubscribe = this.memory.subscribe((event) => {
      void Promise.resolve().then(() => {
        if (this.unsubscribes.has(stop)) deliver(event);
      });
    });
    const stop = () => {
      unsubscribe();
      this.unsubscribes.delete(stop);
    };
    this.unsubscribes.add(stop);
    void Promise.resolve().then(() => onOpen?.());
    return { opened: Promise.resolve(), close: async () => stop() };
  }

  private send<T>(command: () => T): Promise<T> {
    return Promise.resolve().then(command);
  }
}
