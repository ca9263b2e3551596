import type {
  MongoClient,
  ServerClosedEvent,
  ServerHeartbeatFailedEvent,
  ServerHeartbeatSucceededEvent,
} from 'mongodb';

/**
 * Why MongoDB is not answering (a refused connection, an unknown host), from the driver's server
 * monitor. The driver looks for a server for longer than our bounds (30 s by default), so a
 * command cut by its bound has no failure of its own to name: this one is named instead.
 */
export interface ServerMonitor {
  /** The last failed check, while no server the monitor checks answers its checks. */
  readonly lastFailure: Error | undefined;
  /** Stops this user's view; the listeners go with the client's last user. */
  stop(): void;
}

/** One client's checks, shared by every store on it (a client may serve many services). */
class ServerChecks {
  /** Per server address, its last check's failure, or undefined if it answered. */
  private readonly lastCheck = new Map<string, Error | undefined>();
  private latest: Error | undefined;
  users = 0;

  private readonly failed = ({ connectionId, failure }: ServerHeartbeatFailedEvent) => {
    this.lastCheck.set(connectionId, failure);
    this.latest = failure;
  };
  private readonly succeeded = ({ connectionId }: ServerHeartbeatSucceededEvent) =>
    this.lastCheck.set(connectionId, undefined);
  private readonly closed = ({ address }: ServerClosedEvent) => this.lastCheck.delete(address);

  constructor(private readonly client: MongoClient) {
    client.on('serverHeartbeatFailed', this.failed);
    client.on('serverHeartbeatSucceeded', this.succeeded);
    client.on('serverClosed', this.closed);
  }

  /**
   * Named only while every server checked is failing: a member down beside a healthy primary
   * does not explain a command cut, and a server that answered since has no stale reason.
   */
  get lastFailure(): Error | undefined {
    if (this.lastCheck.size === 0) return undefined;
    for (const failure of this.lastCheck.values()) if (failure === undefined) return undefined;
    return this.latest;
  }

  detach(): void {
    this.client.off('serverHeartbeatFailed', this.failed);
    this.client.off('serverHeartbeatSucceeded', this.succeeded);
    this.client.off('serverClosed', this.closed);
  }
}

const checksByClient = new WeakMap<MongoClient, ServerChecks>();

/** Watches `client`'s server monitor; `stop()` once done (a second call does nothing). */
export function monitorServers(client: MongoClient): ServerMonitor {
  let checks = checksByClient.get(client);
  if (checks === undefined) checksByClient.set(client, (checks = new ServerChecks(client)));
  const shared = checks;
  shared.users += 1;
  let stopped = false;
  return {
    get lastFailure() {
      return shared.lastFailure;
    },
    stop() {
      if (stopped) return;
      stopped = true;
      shared.users -= 1;
      if (shared.users > 0) return;
      shared.detach();
      checksByClient.delete(client);
    },
  };
}
