import { MongoError } from 'mongodb';
import type { ClientSession } from 'mongodb';
import { boundedCommand } from '../bounded-command';
import { toStoreError } from '../mongo-error-codes';
import type {
  JoinRequest,
  JoinResult,
  LeaveResult,
  LineCollection,
  RenewResult,
} from './line-commands';
import { confirmInLine, joinLine, leaveLine, readPlace, renewInLine } from './line-commands';
import type { LockEvent, LockHolderState, LockState } from '../../interfaces/lock-state.interface';
import type { ListLocksQuery } from '../list-locks';
import {
  forceReleaseLine,
  inspectLine,
  listLines,
  releaseScopeInLines,
  watchLineEvents,
} from './line-admin';
import type { LinePlace } from './line-document';
import type { LineChange, LineWatch } from './line-events';
import { watchLines } from './line-events';
import { JoinsInFlight } from './joins-in-flight';

export interface LineStoreSettings {
  /** The longest one command may take before the caller stops waiting for it. */
  operationTimeoutMs: number;
  /** How long an idle document stays after the last lease ends. */
  idleRetentionMs: number;
}

/**
 * Where engine v2's lines live, as its acquirer and `LineLocks` use them: the lock collection
 * ({@link LineStore}), or an application collection's lock fields (`DocumentLineStore`).
 */
export interface LineStorage {
  join(request: Omit<JoinRequest, 'idleRetentionMs'>): Promise<JoinResult>;
  leave(key: string, token: string): Promise<LeaveResult>;
  /**
   * Renews `token`'s live entry: its lease ends `ttlMs` from now at the earliest, never sooner
   * than it did; `exactly`: at that time (`expireIn`, which may shorten it).
   */
  renew(key: string, token: string, ttlMs: number, exactly?: boolean): Promise<RenewResult>;
  /** Where `token`'s entry stands, by a read (polling without change streams). */
  place(key: string, token: string): Promise<LinePlace | undefined>;
  inspect(key: string): Promise<LockState | null>;
  /**
   * The changes that may make an entry of `holderId`'s process holder. `onFailure` hears that
   * changes may be missed from now on; `onOpen`, that a stream (re)opened: none is missed
   * after it.
   */
  watch(
    holderId: string,
    onChange: (change: LineChange) => void,
    onFailure?: (error: unknown) => void,
    onOpen?: () => void,
  ): LineWatch;
  /** Every change that may take or free a lock, for `events$` and `waitForRelease`. */
  watchEvents(
    onEvent: (event: LockEvent) => void,
    onFailure?: (error: unknown) => void,
    onOpen?: () => void,
  ): LineWatch;
  /**
   * Settles once the joins of `token` on `key` still on their way have (one whose reply was
   * given up on may land late); undefined when none is. A store whose replies always come
   * has none.
   */
  joinsSettled?(key: string, token: string): Promise<void> | undefined;
}

/**
 * Engine v2's lock collection as `LockService` uses it: the lines of keys with the operator
 * commands and locked transactions' check. The MongoDB {@link LineStore}, or the testing kit's
 * in-memory one.
 */
export interface KeyLineStorage extends LineStorage {
  list(query: ListLocksQuery): Promise<LockState[]>;
  forceRelease(key: string): Promise<LockHolderState[]>;
  releaseScope(scope: string): Promise<number>;
  confirmHeldIn(key: string, token: string, session: ClientSession): Promise<boolean>;
}

/**
 * Engine v2's lock collection: its commands, each bounded by the operation timeout (a command
 * that times out fails with `LockStoreUnavailableError`; its outcome is unknown, and the
 * caller retries by token), and its change stream. The only code that sends them.
 */
export class LineStore implements KeyLineStorage {
  private readonly joins = new JoinsInFlight();

  constructor(
    readonly collection: LineCollection,
    private readonly settings: LineStoreSettings,
  ) {}

  /**
   * Safe on every start (an existing identical index is a no-op): the `gcAt` TTL index, which
   * deletes a key's document once idle for `idleRetentionMs` (never a live one: that would
   * reset its fence), and one on the entries' scopes, so that `releaseScope` reads only the
   * documents of its scope.
   */
  async ensureIndexes(): Promise<void> {
    await this.collection.createIndexes([
      { key: { gcAt: 1 }, name: 'gcAt_ttl', expireAfterSeconds: 0 },
      { key: { 'line.sc': 1 }, name: 'line_scope', sparse: true },
    ]);
  }

  join(request: Omit<JoinRequest, 'idleRetentionMs'>): Promise<JoinResult> {
    const full = { ...request, idleRetentionMs: this.settings.idleRetentionMs };
    const join = boundedCommand('acquire', this.settings.operationTimeoutMs, () =>
      joinLine(this.collection, full),
    );
    return this.joins.track(request.key, request.token, join);
  }

  joinsSettled(key: string, token: string): Promise<void> | undefined {
    return this.joins.settled(key, token);
  }

  leave(key: string, token: string): Promise<LeaveResult> {
    return this.send('release', () => leaveLine(this.collection, key, token));
  }

  renew(key: string, token: string, ttlMs: number, exactly = false): Promise<RenewResult> {
    return this.send('renew', () =>
      renewInLine(this.collection, key, token, ttlMs, this.settings.idleRetentionMs, exactly),
    );
  }

  /**
   * Inside `session`'s transaction: `token`'s entry still holds `key` (see `confirmInLine`). A
   * transient transaction error (a write conflict: someone wrote the line meanwhile) passes
   * through as the driver's, so that `withTransaction` runs the transaction again; others
   * become the library's.
   */
  async confirmHeldIn(key: string, token: string, session: ClientSession): Promise<boolean> {
    try {
      return await confirmInLine(this.collection, key, token, session);
    } catch (error) {
      if (error instanceof MongoError && error.hasErrorLabel('TransientTransactionError'))
        throw error;
      throw toStoreError(error, 'confirmHeld');
    }
  }

  /** Where `token`'s entry stands, by a read (polling without change streams). */
  place(key: string, token: string): Promise<LinePlace | undefined> {
    return this.send('poll', () => readPlace(this.collection, key, token));
  }

  inspect(key: string): Promise<LockState | null> {
    return this.send('inspect', () => inspectLine(this.collection, key));
  }

  list(query: ListLocksQuery): Promise<LockState[]> {
    return this.send('list', () => listLines(this.collection, query));
  }

  /** Frees `key` whoever holds it; the holders removed (see `forceReleaseLine`). */
  forceRelease(key: string): Promise<LockHolderState[]> {
    return this.send('forceRelease', () =>
      forceReleaseLine(this.collection, key, this.settings.idleRetentionMs),
    );
  }

  /** Removes every entry of `scope`; how many of them held (see `releaseScopeInLines`). */
  releaseScope(scope: string): Promise<number> {
    return this.send('releaseScope', () =>
      releaseScopeInLines(this.collection, scope, this.settings.idleRetentionMs),
    );
  }

  /** Every acquisition, release and deletion on the collection, for `events$`. */
  watchEvents(
    onEvent: (event: LockEvent) => void,
    onFailure?: (error: unknown) => void,
    onOpen?: () => void,
  ): LineWatch {
    return watchLineEvents(this.collection, onEvent, onFailure, onOpen);
  }

  /** The changes that may make an entry of `holderId`'s process holder. */
  watch(
    holderId: string,
    onChange: (change: LineChange) => void,
    onFailure?: (error: unknown) => void,
    onOpen?: () => void,
  ): LineWatch {
    return watchLines(this.collection, holderId, onChange, onFailure, onOpen);
  }

  private send<T>(command: string, run: () => Promise<T>) {
    return boundedCommand(command, this.settings.operationTimeoutMs, run).result;
  }
}
