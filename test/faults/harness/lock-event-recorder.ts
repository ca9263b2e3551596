import type {
  ChangeStream,
  ChangeStreamDocument,
  Collection,
  Document,
  ResumeToken,
} from 'mongodb';
import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import { withinMs } from './within-ms';

/** One change of a lock document, as received (shared clock) and in short. */
interface RecordedChange {
  receivedAt: number;
  operation: string;
  /** The fence it wrote, if it wrote one. */
  fence: string | undefined;
  /** The fields removed, then each field written (or of the whole document), in short. */
  change: string;
}

/** Changes kept per key: enough for the history around one grant. */
const KEPT_PER_KEY = 4_000;
/** Around the write of an orphaned fence: this many changes before it and after it. */
const SHOWN_AROUND = 12;
/** Each written field's value is cut to this many characters (the field names all stay). */
const MAX_VALUE_CHARS = 160;
const RETRY_DELAY_MS = 100;
/** How long `stop()` reads on for the changes already written, at most. */
const DRAIN_LIMIT_MS = 3_000;

/**
 * Keeps every change of the lock collection while a scenario runs, so that an orphaned lease
 * explains itself: the write that granted its fence, and what followed (a withdrawal, a
 * give-back, or nothing). A change stream of the run's own client, which the scenarios'
 * fail points (aimed at the workers' appNames) never hit; after an error it resumes where it
 * was (the stream's resume token), and counts the error.
 */
export class LockEventRecorder {
  private readonly changes = new Map<string, RecordedChange[]>();
  private stream: ChangeStream | undefined;
  /** Shared-clock time `stop()` was called at: an empty read sent after it ends the loop. */
  private stopAskedAt: number | undefined;
  private closed = false;
  private errors = 0;
  private readonly loop: Promise<void>;

  constructor(private readonly collection: Collection) {
    this.loop = this.run();
  }

  /**
   * Reads on until a read sent after this call finds nothing more (every change written
   * before it is then recorded: the writes of closing workers matter most), within
   * DRAIN_LIMIT_MS; then closes the stream.
   */
  async stop(): Promise<void> {
    this.stopAskedAt = sharedClockMs();
    await withinMs(this.loop, DRAIN_LIMIT_MS);
    this.closed = true;
    await this.stream?.close().catch(() => undefined);
    await this.loop;
  }

  /**
   * The key's changes around the one that wrote `fence` (its last ones if no recorded change
   * did), one per line: the shared-clock time each was received at, and its offset from that
   * write.
   */
  around(key: string, fence: string): string {
    const changes = this.changes.get(key) ?? [];
    const written = changes.findIndex((c) => c.fence === fence);
    const from = Math.max(
      0,
      written < 0 ? changes.length - 2 * SHOWN_AROUND : written - SHOWN_AROUND,
    );
    const shown = changes.slice(from, from + 2 * SHOWN_AROUND + 1);
    const origin = written < 0 ? (shown[0]?.receivedAt ?? 0) : changes[written].receivedAt;
    const lines = shown.map(
      (c) =>
        `    @${c.receivedAt.toFixed(1)} (${formatOffset(c.receivedAt - origin)}) ` +
        `${c.operation} ${c.change}`,
    );
    const which =
      written < 0
        ? `(no recorded change wrote fence ${fence})`
        : `around the write of fence ${fence}`;
    const errors = this.errors > 0 ? `, ${this.errors} stream error(s), resumed` : '';
    return [`  changes of ${key} ${which}${errors}:`, ...lines].join('\n');
  }

  private async run(): Promise<void> {
    // Unknown until the stream's first batch (`ResumeToken` is `unknown`).
    let resumeAfter: ResumeToken;
    while (!this.closed) {
      const stream = this.collection.watch([], {
        maxAwaitTimeMS: 500,
        ...(resumeAfter === undefined ? {} : { resumeAfter }),
      });
      this.stream = stream;
      try {
        while (!this.closed) {
          const askedAt = sharedClockMs();
          const change = await stream.tryNext();
          // Also advanced by empty batches: a resume never goes back before them.
          resumeAfter = stream.resumeToken ?? resumeAfter;
          if (change !== null) this.record(change);
          else if (this.stopAskedAt !== undefined && askedAt >= this.stopAskedAt) return;
        }
      } catch {
        if (!this.closed) this.errors += 1;
      } finally {
        await stream.close().catch(() => undefined);
      }
      // A server that refuses the stream at once must not be asked again in a tight loop.
      if (!this.closed) await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS));
    }
  }

  private record(change: ChangeStreamDocument): void {
    if (!('documentKey' in change)) return;
    const key = String((change.documentKey as Document)._id);
    const update = 'updateDescription' in change ? change.updateDescription : undefined;
    const set: Document | undefined = update
      ? update.updatedFields
      : 'fullDocument' in change
        ? change.fullDocument
        : undefined;
    const unset = update?.removedFields?.length ? `unset ${update.removedFields.join(',')} ` : '';
    const changes = this.changes.get(key) ?? [];
    if (changes.length >= KEPT_PER_KEY) changes.shift();
    changes.push({
      receivedAt: sharedClockMs(),
      operation: change.operationType,
      fence: set?.fence === undefined ? undefined : String(set.fence),
      change: `${unset}${set ? `set ${describeFields(set)}` : ''}`.trim(),
    });
    this.changes.set(key, changes);
  }
}

/** `field=value` for each field, each value as JSON cut to MAX_VALUE_CHARS. */
function describeFields(fields: Document): string {
  return Object.entries(fields)
    .map(([name, value]) => {
      const json = JSON.stringify(value) ?? String(value);
      return `${name}=${json.length > MAX_VALUE_CHARS ? `${json.slice(0, MAX_VALUE_CHARS)}…` : json}`;
    })
    .join(' ');
}

function formatOffset(ms: number): string {
  return `${ms < 0 ? '-' : '+'}${Math.abs(ms).toFixed(1)} ms`;
}
