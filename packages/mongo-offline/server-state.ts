import { EventEmitter } from 'node:events';
import { type Document, Long, ObjectId } from 'bson';
import { CursorRegistry } from './commands/cursor-registry';
import { Storage } from './engine/storage';
import { TtlMonitor } from './engine/ttl-monitor';
import { FailPoints } from './faults/fail-points';
import { RetryableWrites } from './sessions/retryable-writes';
import { SessionCheckouts } from './sessions/session-checkouts';
import { Transactions } from './sessions/transactions';

export interface ServerOptions {
  host: string;
  port: number;
  replicaSet: boolean;
  ttlMonitorSleepSecs: number;
}

export const SET_NAME = 'rs0';
/** MongoDB 7.0. */
export const MAX_WIRE_VERSION = 21;
export const SERVER_VERSION = '7.0.14';

/** A mongod's electionId for `term`: 0x7fffffff, then the term (int64, big-endian). */
export function electionIdOf(term: number): ObjectId {
  return new ObjectId(`7fffffff${term.toString(16).padStart(16, '0')}`);
}

/** Everything that outlives one connection. */
export class ServerState extends EventEmitter {
  readonly storage = new Storage();
  readonly cursors = new CursorRegistry();
  readonly failPoints = new FailPoints();
  readonly retryableWrites = new RetryableWrites();
  readonly sessionCheckouts = new SessionCheckouts();
  readonly transactions = new Transactions(this.storage, () =>
    Number(this.parameters.transactionLifetimeLimitSeconds),
  );
  /** Sessions seen on any command, for `$listLocalSessions`. */
  readonly sessions = new Map<string, Document>();
  readonly startedAt = new Date();
  /**
   * The replica-set term (`t` of every opTime). A restarted mongod keeps its data and wins a
   * new election, so its term grows; this server keeps nothing across restarts, so its term is
   * its start time in ms, which grows from one run to the next on the same port. A client that
   * has seen a higher (electionId, setVersion) treats a primary reporting a lower one as
   * stale (SDAM), for as long as it does.
   */
  readonly term = Date.now();
  /** As a mongod builds it from the term: `7fffffff` then the term as 8 big-endian bytes. */
  readonly electionId = electionIdOf(this.term);
  /** While in the future, the node is a secondary (simulated replSetStepDown). */
  steppedDownUntil = 0;
  private stepUpTimer: NodeJS.Timeout | undefined;
  /** `topologyVersion.processId`: new at every start, as a mongod's. */
  readonly processId = new ObjectId();
  /** `topologyVersion.counter`: grows at every change of role (step-down, step-up). */
  private topologyCounter = 0;
  private lastConnectionId = 0;
  /** Runtime-settable parameters (getParameter / setParameter). */
  readonly parameters: Record<string, unknown>;
  private readonly ttlMonitor: TtlMonitor;

  constructor(readonly options: ServerOptions) {
    super();
    // One listener per waiting awaitable hello (a client's monitor each).
    this.setMaxListeners(0);
    this.parameters = {
      ttlMonitorSleepSecs: options.ttlMonitorSleepSecs,
      ttlMonitorEnabled: true,
      transactionLifetimeLimitSeconds: 60,
    };
    this.ttlMonitor = new TtlMonitor(
      this.storage,
      () => Number(this.parameters.ttlMonitorSleepSecs),
      () => this.parameters.ttlMonitorEnabled !== false,
    );
  }

  private cursorReaper: NodeJS.Timeout | undefined;

  start(): void {
    this.ttlMonitor.start();
    this.cursorReaper = setInterval(() => this.cursors.reapIdle(), 60_000);
    this.cursorReaper.unref();
  }

  /** What hello and state-change errors report (MongoDB 4.4+). */
  get topologyVersion(): Document {
    return { processId: this.processId, counter: Long.fromNumber(this.topologyCounter) };
  }

  /**
   * A simulated replSetStepDown: a secondary for `ms`, then primary again. Each change of role
   * is a new topologyVersion, and awaitable hellos answer at once (`topologyChanged`).
   */
  stepDown(ms: number): void {
    this.steppedDownUntil = Date.now() + ms;
    this.topologyChanged();
    clearTimeout(this.stepUpTimer);
    // Primary again from here, whatever `Date.now()` says (a timer may fire a little early).
    this.stepUpTimer = setTimeout(() => {
      this.steppedDownUntil = 0;
      this.topologyChanged();
    }, ms).unref();
  }

  private topologyChanged(): void {
    this.topologyCounter += 1;
    this.emit('topologyChanged');
  }

  stop(): void {
    clearTimeout(this.stepUpTimer);
    // Awaitable hellos still waiting answer now.
    this.emit('topologyChanged');
    this.ttlMonitor.stop();
    if (this.cursorReaper) clearInterval(this.cursorReaper);
    this.cursors.killAll();
  }

  emitParameterChange(): void {
    this.ttlMonitor.reschedule();
  }

  /** Sockets currently open (serverStatus.connections.current). */
  openConnections = 0;

  nextConnectionId(): number {
    this.lastConnectionId += 1;
    return this.lastConnectionId;
  }

  get connectionsCreated(): number {
    return this.lastConnectionId;
  }

  get hostAndPort(): string {
    return `${this.options.host}:${this.options.port}`;
  }

  get isWritablePrimary(): boolean {
    return !this.options.replicaSet || Date.now() >= this.steppedDownUntil;
  }
}
