// Fail points a test turned on, so that they are turned off after it, on the same server.
import type { Document, MongoClient } from 'mongodb';

interface EnabledFailPoint {
  name: string;
  client: MongoClient;
}

export class FailPoints {
  private readonly enabled: EnabledFailPoint[] = [];

  async enable(client: MongoClient, command: Document) {
    await client.db('admin').command(command);
    this.enabled.push({ name: command.configureFailPoint, client });
  }

  /** Turns every recorded fail point off; `fallback` serves when the test closed its client. */
  async disableAll(fallback: MongoClient) {
    const errors: string[] = [];
    for (const { name, client } of this.enabled.splice(0)) {
      const off = { configureFailPoint: name, mode: 'off' };
      try {
        await client.db('admin').command(off);
      } catch {
        try {
          await fallback.db('admin').command(off);
        } catch (error) {
          errors.push(`${name}: ${(error as Error).message}`);
        }
      }
    }
    if (errors.length) throw new Error(`Could not turn fail points off: ${errors.join('; ')}`);
  }
}
