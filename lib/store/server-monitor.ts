import type { MongoClient, ServerHeartbeatFailedEvent } from 'mongodb';

/**
 * Listens to the driver's server monitor for why MongoDB is not answering (a refused connection,
 * an unknown host). The driver looks for a server for longer than our bounds (30 s by default),
 * so a command cut by its bound has no failure of its own to name: this one is named instead.
 */
export class ServerMonitor {
  private failure: Error | undefined;
  private readonly failed = (event: ServerHeartbeatFailedEvent) => (this.failure = event.failure);
  // A failure the monitor has since recovered from would be a stale reason.
  private readonly succeeded = () => (this.failure = undefined);

  constructor(private readonly client: MongoClient) {
    client.on('serverHeartbeatFailed', this.failed);
    client.on('serverHeartbeatSucceeded', this.succeeded);
  }

  /** The monitor's last failed check since its last good one, if any. */
  get lastFailure(): Error | undefined {
    return this.failure;
  }

  stop(): void {
    this.client.off('serverHeartbeatFailed', this.failed);
    this.client.off('serverHeartbeatSucceeded', this.succeeded);
  }
}
