import type { ClientSession, MongoClient, TransactionOptions } from 'mongodb';
import type { ResolvedLockModuleOptions } from '../options';
import { formatMs } from '../util/durations';
import { LockStoreUnavailableError } from '../errors/lock-store-unavailable.error';
import { MongoLockError } from '../errors/mongo-lock.error';
import { boundedCommand, unansweredError } from './bounded-command';
import { uriClientOf } from './connection-string';
import { lockedTransactionOptions, openLeaseCollection } from './lock-collection';
import type { LineDocument } from './line/line-document';
import { LineStore } from './line/line-store';
import type { KeyLineStorage } from './line/line-store';
import { isNamedPassingRefusal, toStoreError } from './mongo-error-codes';
import { monitorServers, type ServerMonitor } from './server-monitor';
import { sleep } from '../util/timers';

/**
 * Why the start (connect, create the indexes) failed: nothing was locked, so no outcome is
 * uncertain. Unavailable stays retryable.
 */
function startError(error: unknown): MongoLockError {
  const reason = error instanceof Error ? error.message : String(error);
  const message = `LockService could not start: ${reason}`;
  return toStoreError(error, 'start') instanceof LockStoreUnavailableError
    ? new LockStoreUnavailableError(message, { cause: error })
    : new MongoLockError(message, { cause: error });
}

/** Pauses between tries of the start while MongoDB is unavailable. */
const RETRY_DELAYS_MS = [50, 100, 200, 400, 500];

/** How a `LockService` reaches MongoDB: {@link LockStore}, or the testing kit's in-memory store. */
export interface LockConnection {
  /** The lock collection's lines, `<collectionName>_line`. */
  lines(): KeyLineStorage;
  /** Why locked transactions cannot run here (undefined: they can); asked once. */
  transactionsRefusal(): Promise<string | undefined>;
  /** Closes the client if the connection created it; a client the user gave stays open. */
  close(): Promise<void>;
  /** The key of a live 0.1 lock, if one is found in 0.1's collection (`<collectionName>`). */
  liveV1Lock?(): Promise<string | undefined>;
}

/**
 * A 0.1 lock document (it has a fence) held by an owner whose lease has not ended: 0.1's release
 * sets `owner` to null and leaves `expiresAt` (0.1.0 had exclusive locks only).
 */
const LIVE_V1_LOCK = {
  fence: { $exists: true },
  owner: { $type: 'string' },
  $expr: { $gt: ['$expiresAt', '$$NOW'] },
};

/** The client (created from `uri` if none was given) and the lock collection. */
export class LockStore implements LockConnection {
  private lineStore: LineStore | undefined;
  private transactional: Promise<boolean> | undefined;

  /**
   * Connects and ensures the indexes if asked, retrying until `operationTimeoutMs` while MongoDB
   * is unavailable (an election, a blip), or until `closing` aborts. On failure, closes a client
   * created here.
   */
  static async open(options: ResolvedLockModuleOptions, closing: AbortSignal): Promise<LockStore> {
    const ownsClient = options.client === undefined;
    const client = options.client ?? uriClientOf(options, options.uri as string);
    const endsAt = performance.now() + options.operationTimeoutMs;
    let lastError: unknown;
    // The driver looks for a server for longer than our bound, so a try may never fail within
    // it: the monitor says why. The store keeps it for its commands.
    const monitor = monitorServers(client);
    // Closing the client stops a server selection under way: the start fails at once.
    const stop = () => void client.close().catch(() => undefined);
    if (ownsClient) closing.addEventListener('abort', stop, { once: true });
    const connecting = boundedCommand(
      'start',
      options.operationTimeoutMs,
      async () => {
        // Reconnecting and re-creating an existing index are no-ops.
        for (let tries = 0; ; tries += 1) {
          try {
            if (ownsClient) await client.connect();
            const store = new LockStore(client, ownsClient, options, monitor);
            if (options.ensureIndexes) await store.lines().ensureIndexes();
            return store;
          } catch (error) {
            lastError = error;
            const delayMs = RETRY_DELAYS_MS[Math.min(tries, RETRY_DELAYS_MS.length - 1)];
            const retries = isNamedPassingRefusal(error) && !closing.aborted;
            if (!retries || performance.now() + delayMs >= endsAt) throw startError(error);
            await sleep(delayMs);
          }
        }
      },
      monitor,
      (ms) => {
        const why = lastError ?? monitor.lastFailure;
        return unansweredError(
          `LockService could not start: MongoDB did not answer within ${formatMs(ms)} ` +
            "(connecting, then creating the lock collection's indexes)",
          why instanceof Error ? why : undefined,
          lastError === undefined ? "the server monitor's last check" : 'the last try',
        );
      },
    );
    try {
      return await connecting.result;
    } catch (error) {
      monitor.stop();
      if (ownsClient) await client.close().catch(() => undefined);
      throw error;
    } finally {
      closing.removeEventListener('abort', stop);
    }
  }

  constructor(
    readonly client: MongoClient,
    /** Whether the service created the client (and so must close it). */
    readonly ownsClient: boolean,
    private readonly options: ResolvedLockModuleOptions,
    /** Why MongoDB does not answer, for the errors of commands cut by their bound. */
    readonly serverMonitor: ServerMonitor,
  ) {}

  lines(): LineStore {
    this.lineStore ??= new LineStore(
      openLeaseCollection<LineDocument>(
        this.client,
        this.options.dbName,
        `${this.options.collectionName}_line`,
        this.options.operationTimeoutMs,
      ),
      this.options,
      this.serverMonitor,
    );
    return this.lineStore;
  }

  /** Transactions need a replica set or a sharded cluster. */
  async transactionsRefusal(): Promise<string | undefined> {
    const { operationTimeoutMs } = this.options;
    this.transactional ??= boundedCommand(
      'hello',
      operationTimeoutMs,
      async () => {
        const hello = await this.client.db('admin').command({ hello: 1 });
        return typeof hello.setName === 'string' || hello.msg === 'isdbgrid';
      },
      this.serverMonitor,
    ).result.catch((error: unknown) => {
      this.transactional = undefined;
      throw error;
    });
    return (await this.transactional) ? undefined : 'this deployment has none';
  }

  /**
   * This version neither reads nor writes 0.1's collection, so a 0.1 process still running
   * excludes nobody here (docs/upgrading.md): one read at start finds a lock it holds.
   */
  async liveV1Lock(): Promise<string | undefined> {
    const v1 = this.client.db(this.options.dbName).collection(this.options.collectionName);
    const options = { projection: { _id: 1 }, maxTimeMS: this.options.operationTimeoutMs };
    const found = await v1.findOne(LIVE_V1_LOCK, options);
    return found ? String(found._id) : undefined;
  }

  /**
   * A commit with no answer may leave its transaction open, blocking writes to its documents (a
   * line among them) for up to the transaction lifetime (60 s by default). `killSessions`
   * aborts it if uncommitted; a user may kill its own sessions. Best effort, bounded.
   */
  /** A locked transaction's options, whatever the client's defaults (see `lockedTransactionOptions`). */
  get transactionOptions(): TransactionOptions {
    return lockedTransactionOptions(this.client, this.options.operationTimeoutMs);
  }

  async endTransactionOf(session: ClientSession): Promise<void> {
    if (session.id === undefined) return;
    const killed = boundedCommand(
      'killSessions',
      this.options.operationTimeoutMs,
      () => this.client.db('admin').command({ killSessions: [session.id] }),
      this.serverMonitor,
    );
    await killed.result.catch(() => undefined);
  }

  async close(): Promise<void> {
    this.serverMonitor.stop();
    if (this.ownsClient) await this.client.close();
  }
}
