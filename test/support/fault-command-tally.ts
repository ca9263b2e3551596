import type {
  CommandFailedEvent,
  CommandStartedEvent,
  CommandSucceededEvent,
  Document,
  MongoClient,
} from 'mongodb';

/**
 * Which lock command a `findAndModify` is, by its shape: an acquisition upserts, a release
 * matches `$or` (the owner, or the owner of an earlier release), a renewal matches `$expr`.
 */
export type LockCommandKind = 'acquire' | 'renew' | 'release' | 'other';

function kindOf(command: Document): LockCommandKind {
  if (command.upsert === true) return 'acquire';
  const query = (command.query ?? {}) as Document;
  if (query.$or !== undefined) return 'release';
  if (query.$expr !== undefined) return 'renew';
  return 'other';
}

/**
 * How each lock command (`findAndModify`) sent by one client ended, as the driver's command
 * monitoring saw it, counted by `<kind>:<outcome>`: `ok`; `slow` (a reply after `slowMs` or
 * more); `wce<code>` (a reply with a write concern error); `network` (no reply: the connection
 * closed); `error<code>` (an error reply). Every try counts, the driver's retries included.
 * This is how a scenario learns that its fail points fired, and on what.
 */
export class CommandTally {
  readonly counts: Record<string, number> = {};
  private readonly started = new Map<number, LockCommandKind>();

  constructor(
    client: MongoClient,
    private readonly slowMs: number,
  ) {
    client.on('commandStarted', (event: CommandStartedEvent) => {
      if (event.commandName !== 'findAndModify') return;
      this.started.set(event.requestId, kindOf(event.command));
    });
    client.on('commandSucceeded', (event: CommandSucceededEvent) => {
      const kind = this.take(event.requestId);
      if (!kind) return;
      const wce = (event.reply as Document | undefined)?.writeConcernError as Document | undefined;
      if (wce) this.count(kind, `wce${String(wce.code)}`);
      else this.count(kind, event.duration >= this.slowMs ? 'slow' : 'ok');
    });
    client.on('commandFailed', (event: CommandFailedEvent) => {
      const kind = this.take(event.requestId);
      if (!kind) return;
      const failure = event.failure as Error & { code?: number | string };
      if (failure.name === 'MongoNetworkError' || failure.name === 'MongoNetworkTimeoutError') {
        this.count(kind, 'network');
      } else if (failure.code !== undefined) this.count(kind, `error${failure.code}`);
      else this.count(kind, failure.name);
    });
  }

  private take(requestId: number): LockCommandKind | undefined {
    const kind = this.started.get(requestId);
    this.started.delete(requestId);
    return kind;
  }

  private count(kind: LockCommandKind, outcome: string): void {
    const name = `${kind}:${outcome}`;
    this.counts[name] = (this.counts[name] ?? 0) + 1;
  }
}
