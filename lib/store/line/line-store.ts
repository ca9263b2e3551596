import { MongoError } from 'mongodb';
import type { ClientSession } from 'mongodb';
import { boundedCommand } from '../bounded-command';
import { sleep } from '../../util/timers';
import type { ServerMonitor } from '../server-monitor';
import { isResumePointLostError, toStoreError } from '../mongo-error-codes';
import type {
  JoinRequest,
  JoinResult,
  LeaveResult,
  LineCollection,
  RenewResult,
} from './line-commands';
import {
  confirmInLine,
  joinLine,
  leaveLineTogether,
  readPlace,
  renewInLine,
} from './line-commands';
import type { LockEvent, LockHolderState, LockState } from '../../interfaces/lock-state.interface';
import type { ListLocksQuery } from '../list-locks';
import {
  forceReleaseLine,
  inspectLine,
  listLines,
  releaseScopeInLines,
  watchLineEvents,
} from './line-admin';
import type { HoldingEntry, LinePlace } from './line-document';
import type { LineChange, LineWatch } from './line-events';
import { StreamInvalidatedError, watchLines } from './line-events';
import { JoinsInFlight } from './joins-in-flight';
import type { ScopeHoldersRemoved } from './line-admin';

/** The tokens asked to leave a key while a leave of it is on its way, and their write's results. */
interface NextLeaves {
  tokens: string[];
  sent: Promise<LeaveResult[]>;
}

export interface LineStoreSettings {
  /** Ms the caller waits for one command before giving up on it. */
  operationTimeoutMs: number;
  /** Ms an idle document stays after the last lease ends. */
  idleRetentionMs: number;
  /** Whether to make the collection's indexes (at start, and again after it was dropped). */
  ensureIndexes?: boolean;
}

/** Where lines live: {@link LineStore}, or a user collection's fields (`DocumentLineStore`). */
export interface LineStorage {
  join(request: Omit<JoinRequest, 'idleRetentionMs'>): Promise<JoinResult>;
  leave(key: string, token: string): Promise<LeaveResult>;
  /** Lease ends `ttlMs` from now or later; `exactly` (`expireIn`): exactly then, maybe sooner. */
  renew(key: string, token: string, ttlMs: number, exactly?: boolean): Promise<RenewResult>;
  /** Where `token`'s entry stands, by a read (polling without change streams). */
  place(key: string, token: string): Promise<LinePlace | undefined>;
  inspect(key: string): Promise<LockState | null>;
  /**
   * The changes that may make an entry of `holderId`'s process holder. `onFailure`: changes may
   * be missed from now on; `onOpen`: a stream (re)opened, none is missed after it.
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
   * Settles once `token`'s joins on `key` still on their way have (one given up on may land
   * late); undefined when none is. Optional for a store whose replies always come.
   */
  joinsSettled?(key: string, token: string): Promise<void> | undefined;
  /** The driver's server monitor's last failure while no server answers (why MongoDB is silent). */
  monitorFailure?(): Error | undefined;
}

/**
 * The lock collection as `LockService` uses it, with operator commands and the locked
 * transactions' check: MongoDB's {@link LineStore}, or the testing kit's in-memory one.
 */
export interface KeyLineStorage extends LineStorage {
  list(query: ListLocksQuery): Promise<LockState[]>;
  /** With `fences` (holders' fences, as `inspect` reports them): only those holders go. */
  forceRelease(key: string, fences?: readonly bigint[]): Promise<LockHolderState[]>;
  releaseScope(scope: string): Promise<ScopeHoldersRemoved[]>;
  confirmHeldIn(key: string, entry: HoldingEntry, session: ClientSession): Promise<boolean>;
}

/**
 * The only sender of the lock collection's commands, each bounded by the operation timeout (see
 * `boundedCommand`; the caller retries by token), and of its change streams.
 */
export class LineStore implements KeyLineStorage {
  private readonly joins: JoinsInFlight;
  /** Per key with a leave on its way, the leaves asked for meanwhile (`leave`). */
  private readonly nextLeaves = new Map<string, NextLeaves>();

  constructor(
    readonly collection: LineCollection,
    private readonly settings: LineStoreSettings,
    /** Names why MongoDB does not answer a command cut by its bound. */
    private readonly serverMonitor?: ServerMonitor,
  ) {
    this.joins = new JoinsInFlight(serverMonitor);
  }

  /**
   * Safe on every start: the `gcAt` TTL index (deletes idle documents, never a live one: that
   * would reset its fence) and one on entry scopes for `releaseScope`.
   */
  async ensureIndexes(): Promise<void> {
    await this.collection.createIndexes([
      { key: { gcAt: 1 }, name: 'gcAt_ttl', expireAfterSeconds: 0 },
      { key: { 'line.sc': 1 }, name: 'line_scope', sparse: true },
    ]);
  }

  join(request: Omit<JoinRequest, 'idleRetentionMs'>): Promise<JoinResult> {
    const full = { ...request, idleRetentionMs: this.settings.idleRetentionMs };
    return this.joins.join(request.key, request.token, this.settings.operationTimeoutMs, (retry) =>
      joinLine(this.collection, full, retry),
    );
  }

  joinsSettled(key: string, token: string): Promise<void> | undefined {
    return this.joins.settled(key, token);
  }

  monitorFailure(): Error | undefined {
    return this.serverMonitor?.lastFailure;
  }

  /**
   * A leave goes at once, unless one of the key's is on its way: then it goes after that one,
   * together with the others asked for meanwhile, as one write (a `releaseAllHeld` of many
   * shared holders: two commands, not one each rewriting a line of up to 1,000 entries).
   */
  leave(key: string, token: string): Promise<LeaveResult> {
    const next = this.nextLeaves.get(key);
    if (!next) return this.sendLeaves(key, [token]).then((results) => results[0]);
    const place = next.tokens.push(token) - 1;
    return next.sent.then((results) => results[place]);
  }

  private sendLeaves(key: string, tokens: string[]): Promise<LeaveResult[]> {
    const sent = this.send('release', () => leaveLineTogether(this.collection, key, tokens));
    const nextTokens: string[] = [];
    const nextSent = sent
      .catch(() => undefined)
      .then(() => {
        if (nextTokens.length > 0) return this.sendLeaves(key, nextTokens);
        this.nextLeaves.delete(key);
        return [];
      });
    this.nextLeaves.set(key, { tokens: nextTokens, sent: nextSent });
    return sent;
  }

  renew(key: string, token: string, ttlMs: number, exactly = false): Promise<RenewResult> {
    return this.send('renew', () =>
      renewInLine(this.collection, key, token, ttlMs, this.settings.idleRetentionMs, exactly),
    );
  }

  /**
   * In `session`'s transaction, `entry` still holds `key` (see `confirmInLine`). A
   * transient transaction error (someone wrote the line meanwhile) passes through unwrapped so
   * that `withTransaction` reruns; others become the library's.
   */
  async confirmHeldIn(key: string, entry: HoldingEntry, session: ClientSession): Promise<boolean> {
    try {
      return await confirmInLine(this.collection, key, entry, session);
    } catch (error) {
      if (error instanceof MongoError && error.hasErrorLabel('TransientTransactionError'))
        throw error;
      throw toStoreError(error, 'confirmHeld');
    }
  }

  place(key: string, token: string): Promise<LinePlace | undefined> {
    return this.send('poll', () => readPlace(this.collection, key, token));
  }

  inspect(key: string): Promise<LockState | null> {
    return this.send('inspect', () => inspectLine(this.collection, key));
  }

  list(query: ListLocksQuery): Promise<LockState[]> {
    return this.send('list', () => listLines(this.collection, query));
  }

  forceRelease(key: string, fences?: readonly bigint[]): Promise<LockHolderState[]> {
    return this.send('forceRelease', () =>
      forceReleaseLine(this.collection, key, this.settings.idleRetentionMs, fences),
    );
  }

  releaseScope(scope: string): Promise<ScopeHoldersRemoved[]> {
    return this.send('releaseScope', () =>
      releaseScopeInLines(this.collection, scope, this.settings.idleRetentionMs),
    );
  }

  watchEvents(
    onEvent: (event: LockEvent) => void,
    onFailure?: (error: unknown) => void,
    onOpen?: () => void,
  ): LineWatch {
    const { operationTimeoutMs } = this.settings;
    return watchLineEvents(this.collection, onEvent, onFailure, onOpen, operationTimeoutMs);
  }

  watch(
    holderId: string,
    onChange: (change: LineChange) => void,
    onFailure?: (error: unknown) => void,
    onOpen?: () => void,
  ): LineWatch {
    const { operationTimeoutMs, ensureIndexes } = this.settings;
    let closed = false;
    let remaking = false;
    // The collection (or its database) was dropped, or MongoDB came back without its history
    // (a restart on an empty data directory), the indexes gone with it: the TTL index is made
    // again, retried until it is (a database still being dropped refuses it for a while).
    const remakeIndexes = async () => {
      remaking = true;
      for (let pauseMs = 250; !closed; pauseMs = Math.min(pauseMs * 2, 30_000)) {
        try {
          await this.send('createIndexes', () => this.ensureIndexes());
          break;
        } catch {
          await sleep(pauseMs, false);
        }
      }
      remaking = false;
    };
    const failed = (error: unknown) => {
      const gone = error instanceof StreamInvalidatedError || isResumePointLostError(error);
      if (ensureIndexes && !remaking && gone) {
        void remakeIndexes();
      }
      onFailure?.(error);
    };
    const watch = watchLines(
      this.collection,
      holderId,
      onChange,
      failed,
      onOpen,
      operationTimeoutMs,
    );
    return {
      opened: watch.opened,
      close: () => {
        closed = true;
        return watch.close();
      },
    };
  }

  private send<T>(command: string, run: () => Promise<T>) {
    const { operationTimeoutMs } = this.settings;
    return boundedCommand(command, operationTimeoutMs, run, this.serverMonitor).result;
  }
}
