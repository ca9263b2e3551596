// Records a client entity's command monitoring events, minus the ones the spec says to ignore.
import type {
  CommandFailedEvent,
  CommandStartedEvent,
  CommandSucceededEvent,
  MongoClient,
} from 'mongodb';

export type CommandEventType =
  'commandStartedEvent' | 'commandSucceededEvent' | 'commandFailedEvent';

export type RecordedEvent =
  | { type: 'commandStartedEvent'; event: CommandStartedEvent }
  | { type: 'commandSucceededEvent'; event: CommandSucceededEvent }
  | { type: 'commandFailedEvent'; event: CommandFailedEvent };

const DRIVER_EVENT_NAMES: Record<CommandEventType, string> = {
  commandStartedEvent: 'commandStarted',
  commandSucceededEvent: 'commandSucceeded',
  commandFailedEvent: 'commandFailed',
};

// Commands carrying credentials (command logging and monitoring spec, "Security").
const SENSITIVE_COMMANDS = new Set([
  'authenticate',
  'saslstart',
  'saslcontinue',
  'getnonce',
  'createuser',
  'updateuser',
  'copydbgetnonce',
  'copydbsaslstart',
  'copydb',
]);

export class EventRecorder {
  readonly events: RecordedEvent[] = [];
  private recording = true;
  private readonly ignored: Set<string>;

  constructor(
    client: MongoClient,
    readonly observed: readonly string[],
    ignoreCommands: readonly string[] = [],
  ) {
    this.ignored = new Set([...ignoreCommands, 'configureFailPoint']);
    for (const type of Object.keys(DRIVER_EVENT_NAMES) as CommandEventType[]) {
      if (!observed.includes(type)) continue;
      client.on(DRIVER_EVENT_NAMES[type] as 'commandStarted', (event: CommandStartedEvent) =>
        this.record(type, event),
      );
    }
  }

  /** The spec turns listeners off after the operations, before the runner's own clean-up. */
  stop() {
    this.recording = false;
  }

  startedEvents(): CommandStartedEvent[] {
    return this.events.flatMap((e) => (e.type === 'commandStartedEvent' ? [e.event] : []));
  }

  private record(type: CommandEventType, event: any) {
    if (!this.recording || this.isIgnored(event)) return;
    this.events.push({ type, event });
  }

  private isIgnored(event: { commandName: string; command?: object; reply?: object }) {
    const name = event.commandName;
    if (this.ignored.has(name) || SENSITIVE_COMMANDS.has(name.toLowerCase())) return true;
    // hello with speculative authentication is sensitive; the driver then redacts it to {}.
    const body = event.command ?? event.reply;
    const isHello = ['hello', 'ismaster'].includes(name.toLowerCase());
    return isHello && body !== undefined && Object.keys(body).length === 0;
  }
}
