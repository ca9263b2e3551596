import { MongoClient, MongoError } from 'mongodb';
import type { ClientSession, Timestamp } from 'mongodb';
import type { LockHolderState, LockState } from '../interfaces/lock-state.interface';
import type { ResolvedLockModuleOptions } from '../options';
import { formatMs } from '../util/durations';
import { LockStoreUnavailableError } from '../errors/lock-store-unavailable.error';
import { MongoLockError } from '../errors/mongo-lock.error';
import type { AcquireAttemptOutcome, AttemptTarget } from './acquire-attempt';
import { boundedCommand } from './bounded-command';
import { grantedReservation } from './direct-grant';
import type { BoundedCommand } from './bounded-command';
import { lockCollectionCommands } from './lease-commands';
import type { ListLocksQuery } from './list-locks';
import type { LeaseCommands } from './lease-commands';
import { openLeaseCollection, openLockCollection } from './lock-collection';
import type { LineDocument } from './line/line-document';
import { LineStore } from './line/line-store';
import type { OpenLockChangeStreamOptions } from './lock-change-stream';
import type { LockChangeStream } from './lock-document';
import { isStoreUnavailableError, isUnreachableError, toStoreError } from './mongo-error-codes';
import { RESERVATION_TTL_MS } from './lock-modes';
import type { ReservationUse } from './lock-modes';
import type { ReleaseOptions, ReleaseResult } from './release-lease';
import type { RenewLeaseOutcome } from './renew-lease';
import { nextTurn, settlesWithin, sleep } from '../util/timers';

/**
 * Why the start (connect, create the indexes) failed. Not a lock command's failure: nothing
 * was locked, so there is no outcome to be unsure of. Unavailable stays retryable.
 */
function startError(error: unknown): MongoLockError {
  const reason = error instanceof Error ? error.message : String(error);
  const message = `LockService could not start: ${reason}`;
  return toStoreError(error, 'start') instanceof LockStoreUnavailableError
    ? new LockStoreUnavailableError(message, { cause: error })
    : new MongoLockError(message, { cause: error });
}

/** A key's liveness with the timing a waiter needs. */
export interface KeyLeaseProbe {
  held: boolean;
  remainingMs: number;
  sentAt: number;
  operationTime: Timestamp | undefined;
}

export interface StoreReleaseOptions extends ReleaseOptions {
  /** The release timed out, and has now settled on the server after all (or failed). */
  onLateOutcome?: () => void;
}

/** Pauses between tries of the start or of a withdrawal while MongoDB is unavailable. */
const RETRY_DELAYS_MS = [50, 100, 200, 400, 500];
const retryDelayMs = (tries: number) =>
  RETRY_DELAYS_MS[Math.min(tries, RETRY_DELAYS_MS.length - 1)];

/** Tries of one give-back while MongoDB is unavailable, before the lease is left to run out. */
const GIVE_BACK_TRIES = 3;

const idOf = (key: string, owner: string) => `${owner}\0${key}`;

/**
 * The store's functions bound to one connected client and lock collection. Every command is
 * bounded by `operationTimeoutMs` and throws only the library's errors. The store also owns
 * what an unknown outcome leaves behind: an attempt that won after its caller stopped waiting,
 * or a lock its caller gave up on, is released by owner token.
 */
export class LockStore {
  /** Attempts still on their way, by owner token and key (a timed-out one may yet win). */
  private readonly inFlight = new Map<string, Set<Promise<unknown>>>();
  /** Wins handed to a caller, who now releases them; never given back behind its back. */
  private readonly claimed = new Set<string>();
  private readonly givingBack = new Map<string, Promise<ReleaseResult | undefined>>();
  /**
   * A release may hand an exclusive lease to another caller here without a write: leases end
   * behind their holder's back only by time (or `releaseScope`, which scoped leases heed).
   */
  readonly handsOverInLease: boolean = true;
  /** False from a command that found MongoDB unavailable until one gets through again. */
  private reachable = true;
  /** Withdrawals on their way or waiting to be tried again; close() waits for them, bounded. */
  private readonly withdrawing = new Set<Promise<void>>();
  /** close() has begun: withdrawals are not tried again. */
  private closing = false;
  private transactional: Promise<boolean> | undefined;

  /**
   * Connects (creating the client from `uri` when none was given) and ensures the indexes
   * if asked. A client created here is closed again if any of that fails.
   */
  static async open(options: ResolvedLockModuleOptions): Promise<LockStore> {
    const ownsClient = options.client === undefined;
    const client = options.client ?? new MongoClient(options.uri as string);
    const endsAt = performance.now() + options.operationTimeoutMs;
    let lastError: unknown;
    const connecting = boundedCommand(
      'start',
      options.operationTimeoutMs,
      async () => {
        // An election (a step-down), a network blip: try again until operationTimeoutMs, as
        // lock commands do. Connecting again is a no-op once connected; so is an existing index.
        for (let tries = 0; ; tries += 1) {
          try {
            if (ownsClient) await client.connect();
            const store = new LockStore(client, ownsClient, options);
            if (options.ensureIndexes) await store.ensureIndexes();
            return store;
          } catch (error) {
            lastError = error;
            const delayMs = retryDelayMs(tries);
            if (!isStoreUnavailableError(error) || performance.now() + delayMs >= endsAt) {
              throw startError(error);
            }
            await sleep(delayMs);
          }
        }
      },
      (ms) =>
        `LockService could not start: MongoDB did not answer within ${formatMs(ms)} ` +
        "(connecting, then creating the lock collection's indexes)" +
        (lastError instanceof Error ? `; the last try failed: ${lastError.message}` : ''),
    );
    try {
      return await connecting.result;
    } catch (error) {
      // Closing also stops a server selection still under way.
      if (ownsClient) await client.close().catch(() => undefined);
      throw error;
    }
  }

  private lineStore: LineStore | undefined;

  constructor(
    readonly client: MongoClient,
    /** Whether the service created the client (and so must close it). */
    readonly ownsClient: boolean,
    private readonly options: ResolvedLockModuleOptions,
    /** Where the leases live: by default the lock collection. */
    private readonly commands: LeaseCommands = lockCollectionCommands(
      openLockCollection(
        client,
        options.dbName,
        options.collectionName,
        options.operationTimeoutMs,
      ),
      client,
      options.idleRetentionMs,
    ),
  ) {}

  async ensureIndexes(): Promise<void> {
    await this.commands.ensureIndexes();
    if (this.options.engine === 'v2') await this.lines().ensureIndexes();
  }

  /** Engine v2's lock collection, `<collectionName>_line` (module option `engine: 'v2'`). */
  lines(): LineStore {
    this.lineStore ??= new LineStore(
      openLeaseCollection<LineDocument>(
        this.client,
        this.options.dbName,
        `${this.options.collectionName}_line`,
        this.options.operationTimeoutMs,
      ),
      this.options,
    );
    return this.lineStore;
  }

  /**
   * One acquisition attempt. A win handed to the caller is claimed: the caller must release
   * it (or {@link giveBack} it). A win that arrives after the caller stopped waiting for this
   * attempt is reported to `onLateWin`: only the caller knows whether a retry with the same
   * token may still recognise it (then nothing is to be done) or the call is over (then
   * {@link giveBackUnclaimed}).
   */
  attempt(
    key: string,
    owner: string,
    ttlMs: number,
    onLateWin: () => void,
    timeoutMs = this.options.operationTimeoutMs,
    /** What the attempt must also record, check or create (see `AttemptTarget`). */
    target?: AttemptTarget,
    /** The waiting process's reservation (see `AcquireAttemptRequest.reservation`). */
    reservation?: string,
    /** How the attempt uses the reservation (see `ReservationUse`). */
    reservationUse?: ReservationUse,
  ): Promise<AcquireAttemptOutcome> {
    const id = idOf(key, owner);
    const command = this.send('acquire', timeoutMs, () =>
      this.commands.attempt({
        key,
        owner,
        holder: this.options.holderId,
        ttlMs,
        target,
        reservation,
        reservationUse,
      }),
    );
    // Registered before the in-flight tracking, so the claim is made before anyone waiting
    // for this attempt to settle looks at it.
    void command.sent.then(
      (outcome) => {
        if (!outcome.won) return;
        if (!command.timedOut()) this.claimed.add(id);
        else onLateWin();
      },
      () => undefined,
    );
    this.trackInFlight(id, command.sent);
    return command.result;
  }

  /** `leaveLine`: see `RenewLeaseRequest`. */
  renew(
    key: string,
    owner: string,
    ttlMs: number,
    timeoutMs = this.options.operationTimeoutMs,
    leaveLine = false,
  ): Promise<RenewLeaseOutcome> {
    return this.send('renew', timeoutMs, () =>
      this.commands.renew({ key, owner, ttlMs, ...(leaveLine ? { leaveLine } : {}) }),
    ).result;
  }

  /**
   * Releases by owner token (and the lease's `fence`, when known); says where the lock went in
   * the same write: to `successor` (a caller waiting here, which then holds it), or to another
   * waiting process.
   */
  async release(
    key: string,
    owner: string,
    { fence, successor, onLateOutcome }: StoreReleaseOptions = {},
  ): Promise<ReleaseResult> {
    const command = this.send('release', this.options.operationTimeoutMs, () =>
      this.commands.release(key, owner, { fence, successor }),
    );
    void command.sent.then(
      () => command.timedOut() && onLateOutcome?.(),
      () => command.timedOut() && onLateOutcome?.(),
    );
    const result = await command.result;
    this.claimed.delete(idOf(key, owner));
    if (result.transferred && successor) this.claimed.add(idOf(key, successor.owner));
    return result;
  }

  /**
   * Releases, in the background, whatever `owner` may hold on `key`: after the attempts still
   * on their way have settled, by owner token (and the lease's `fence`, when the caller knows
   * it), a few times while MongoDB is unavailable. Resolves to the release's result (where the
   * lock went, as for {@link release}), or `undefined` if it could not be sent (the lease then
   * runs out by itself); never rejects. `close()` waits for these, within its bound.
   */
  giveBack(
    key: string,
    owner: string,
    fence?: bigint,
    /** A grant handed out with our place in line (`AcquireAttemptWon.leavesLine`): drop it first. */
    leaveLine = false,
  ): Promise<ReleaseResult | undefined> {
    const id = idOf(key, owner);
    this.claimed.delete(id);
    const running = this.givingBack.get(id);
    if (running) return running;
    const task = this.giveBackOnce(key, owner, id, fence, leaveLine).finally(() =>
      this.givingBack.delete(id),
    );
    this.givingBack.set(id, task);
    return task;
  }

  /**
   * `owner`'s lease on `key` ended without a release command (a write released it, or it was
   * left to run out): it is no longer claimed, so a late win of that token is given back.
   */
  forget(key: string, owner: string): void {
    this.claimed.delete(idOf(key, owner));
  }

  /**
   * Gives back a win nobody was told of, once the token's attempts still on their way have
   * settled, unless one of them was handed out meanwhile (claimed). Only for a call that
   * sends no more attempts: a later attempt could recognise the win after the release.
   */
  async giveBackUnclaimed(key: string, owner: string): Promise<ReleaseResult | undefined> {
    const id = idOf(key, owner);
    await this.givingBack.get(id); // it may have been sent before this win
    await this.inFlightSettled(id);
    return this.claimed.has(id) ? undefined : this.giveBack(key, owner);
  }

  /**
   * Whether the deployment runs transactions (a replica set or a sharded cluster), asked once.
   * False where the store has no transactional lease commands.
   */
  supportsTransactions(): Promise<boolean> {
    if (!this.commands.confirmHeldIn) return Promise.resolve(false);
    this.transactional ??= this.send('hello', this.options.operationTimeoutMs, async () => {
      const hello = await this.client.db('admin').command({ hello: 1 });
      return typeof hello.setName === 'string' || hello.msg === 'isdbgrid';
    }).result.catch((error: unknown) => {
      this.transactional = undefined;
      throw error;
    });
    return this.transactional;
  }

  /**
   * Inside `session`'s transaction: `owner` still holds `key` (see `LeaseCommands.confirmHeldIn`).
   * A transient transaction error (a write conflict: someone wrote the lock meanwhile) passes
   * through as the driver's, so that `withTransaction` runs the transaction again; others
   * become the library's.
   */
  async confirmHeldIn(key: string, owner: string, session: ClientSession): Promise<boolean> {
    const { commands } = this;
    if (!commands.confirmHeldIn) return false;
    try {
      return await commands.confirmHeldIn(key, owner, session);
    } catch (error) {
      if (error instanceof MongoError && error.hasErrorLabel('TransientTransactionError'))
        throw error;
      throw toStoreError(error, 'confirmHeld');
    }
  }

  /**
   * A waiting process leaves `key`'s queue: its reservation goes, in the background. While
   * MongoDB is unavailable the withdrawal is tried again until it is confirmed or the
   * reservation has run out by itself (`RESERVATION_TTL_MS`): a stale place in line would be
   * granted the key, and the next waiter kept waiting for that grant's lease.
   */
  withdraw(key: string, reservation: string, exceptGrant?: string): void {
    const { commands } = this;
    if (!commands.withdraw) return;
    const withdraw = commands.withdraw.bind(commands);
    // An attempt still on its way (its caller stopped waiting) may yet write the reservation:
    // wait for it, however long (if it never settles, the reservation runs out by itself).
    const attempts = [...this.inFlight]
      .filter(([id]) => id.endsWith(`\0${key}`))
      .flatMap(([, settled]) => [...settled]);
    const task = Promise.all(attempts).then(async () => {
      // The place's lease runs from its last renewal, sent before now.
      const endsAt = performance.now() + RESERVATION_TTL_MS;
      for (let tries = 0; ; tries += 1) {
        try {
          await this.send('withdraw', this.options.operationTimeoutMs, () =>
            withdraw(key, reservation, exceptGrant),
          ).result;
          return;
        } catch (error) {
          const delayMs = retryDelayMs(tries);
          const worthIt = isStoreUnavailableError(error) && performance.now() + delayMs < endsAt;
          if (this.closing || !worthIt) return;
          await sleep(delayMs, false);
          if (this.closing) return;
        }
      }
    });
    this.withdrawing.add(task);
    void task.finally(() => this.withdrawing.delete(task));
  }

  /**
   * A parked waiting process keeps its place in `key`'s line by a small write (see
   * `keepReservation`): its remaining lease, or `undefined` if the place is gone (an attempt
   * then takes one again).
   */
  keepPlace(key: string, reservation: string): Promise<number | undefined> {
    const { commands } = this;
    if (!commands.keepPlace) return Promise.resolve(undefined);
    const keepPlace = commands.keepPlace.bind(commands);
    return this.send('keepPlace', this.options.operationTimeoutMs, () =>
      keepPlace(key, reservation),
    ).result;
  }

  /**
   * Drops the place in line a grant handed out here went to (`owner`: the grant's token),
   * before that grant is released unconfirmed: else the release would grant the key back to
   * it, where nobody waits any more. Never rejects: at worst the grant lapses.
   */
  async withdrawGrantedPlace(key: string, owner: string): Promise<void> {
    const { commands } = this;
    if (!commands.withdraw) return;
    const withdraw = commands.withdraw.bind(commands);
    await this.send('withdraw', this.options.operationTimeoutMs, () =>
      withdraw(key, grantedReservation(owner), owner),
    ).result.catch(() => undefined);
  }

  /** Frees every live lease of `scope` in the collection (see `releaseScope`). */
  releaseScope(scope: string): Promise<number> {
    const { commands } = this;
    if (!commands.releaseScope) return Promise.resolve(0);
    return this.send('releaseScope', this.options.operationTimeoutMs, () =>
      (commands.releaseScope as (scope: string) => Promise<number>)(scope),
    ).result;
  }

  inspect(key: string): Promise<LockState | null> {
    return this.send('inspect', this.options.operationTimeoutMs, () => this.commands.inspect(key))
      .result;
  }

  /** A page of the collection's keys in key order (see `listLocks`); none where unsupported. */
  list(query: ListLocksQuery): Promise<LockState[]> {
    const { commands } = this;
    if (!commands.list) return Promise.resolve([]);
    const list = commands.list.bind(commands);
    return this.send('list', this.options.operationTimeoutMs, () => list(query)).result;
  }

  /** Frees every live lease of `key`, whoever holds it (see `forceRelease`); who was released. */
  forceRelease(key: string): Promise<LockHolderState[]> {
    const { commands } = this;
    if (!commands.forceRelease) return Promise.resolve([]);
    const release = commands.forceRelease.bind(commands);
    return this.send('forceRelease', this.options.operationTimeoutMs, () => release(key)).result;
  }

  async probe(key: string): Promise<KeyLeaseProbe> {
    const { state, sentAt, operationTime } = await this.send(
      'inspect',
      this.options.operationTimeoutMs,
      () => this.commands.probe(key),
    ).result;
    return {
      held: state?.held ?? false,
      remainingMs: state?.remainingMs ?? 0,
      sentAt,
      operationTime,
    };
  }

  openChangeStream(options: OpenLockChangeStreamOptions): LockChangeStream {
    return this.commands.openChangeStream(options);
  }

  /**
   * Waits (at most `withinMs` or `operationTimeoutMs`, the shorter, and not at all while MongoDB is
   * known to be unreachable) for attempts still on their way and for the give-backs they lead
   * to, then closes the client if the store created it; a client the user gave stays open.
   */
  async close(withinMs = this.options.operationTimeoutMs): Promise<void> {
    const endsAt = performance.now() + Math.min(withinMs, this.options.operationTimeoutMs);
    this.closing = true;
    if (this.reachable) await this.settleBeforeClose(endsAt);
    if (this.ownsClient) await this.client.close();
  }

  private async settleBeforeClose(endsAt: number): Promise<void> {
    const attempts = [...this.inFlight.values()].flatMap((set) => [...set]);
    await settlesWithin(Promise.all(attempts), endsAt - performance.now());
    // Their callers give back what they took a few promise turns later.
    await nextTurn();
    const leaving = [...this.givingBack.values(), ...this.withdrawing];
    await settlesWithin(Promise.all(leaving), endsAt - performance.now());
  }

  /**
   * One bounded command that is not a lease command (a document lock's write, say): its
   * errors are translated and its outcome tells whether MongoDB is reachable, as for the others.
   */
  run<T>(command: string, send: () => Promise<T>): Promise<T> {
    return this.send(command, this.options.operationTimeoutMs, send).result;
  }

  /** One bounded command; a reply says MongoDB is reachable, a network failure that it is not. */
  private send<T>(command: string, timeoutMs: number, run: () => Promise<T>): BoundedCommand<T> {
    const sent = boundedCommand(command, Math.max(1, timeoutMs), run);
    sent.result.then(
      () => (this.reachable = true),
      (error: unknown) => {
        // Our own timeout only says "slow": close() still waits, within its bound.
        if (isUnreachableError((error as { cause?: unknown }).cause)) this.reachable = false;
      },
    );
    return sent;
  }

  private trackInFlight(id: string, sent: Promise<unknown>): void {
    let attempts = this.inFlight.get(id);
    if (!attempts) this.inFlight.set(id, (attempts = new Set()));
    const settled = sent.then(
      () => undefined,
      () => undefined,
    );
    attempts.add(settled);
    void settled.then(() => {
      attempts.delete(settled);
      if (attempts.size === 0 && this.inFlight.get(id) === attempts) this.inFlight.delete(id);
    });
  }

  /** The token's attempts on this key still on their way have settled, or one command's time passed. */
  private async inFlightSettled(id: string): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all([...(this.inFlight.get(id) ?? [])]),
      new Promise((resolve) => (timer = setTimeout(resolve, this.options.operationTimeoutMs))),
    ]);
    clearTimeout(timer);
  }

  private async giveBackOnce(
    key: string,
    owner: string,
    id: string,
    fence: bigint | undefined,
    leaveLine: boolean,
  ): Promise<ReleaseResult | undefined> {
    // A release sent before an attempt still on its way would miss that attempt's win.
    await this.inFlightSettled(id);
    if (leaveLine) await this.withdrawGrantedPlace(key, owner);
    for (let tries = 1; ; tries += 1) {
      try {
        return await this.release(key, owner, { fence });
      } catch (error) {
        if (!isStoreUnavailableError(error) || tries >= GIVE_BACK_TRIES) return undefined;
        await sleep(100 * 2 ** tries);
      }
    }
  }
}
