import type {
  ChangeStream,
  ChangeStreamDocument,
  Collection,
  Document,
  ResumeToken,
} from 'mongodb';
import { sharedClockMs } from '../../support/fault-clock';

/** One change of a lock document, as received (shared clock) and in short. */
interface RecordedChange {
  receivedAt: number;
  operation: string;
  /** The fence it wrote, if it wrote one. */
  fence: string | undefined;
  /** The fields written (or the whole document) and the fields removed, as compact JSON. */
  change: string;
}

/** Events kept per key: enough for the history around one grant. */
const KEPT_PER_KEY = 4_000;
/** Around the write of an orphaned fence: this many changes before it and after it. */
const SHOWN_AROUND = 12;
const MAX_CHANGE_CHARS = 600;
const RETRY_DELAY_MS = 100;

/**
 * Keeps every change of the lock collection while a scenario runs, so that an orphaned lease
 * explains itself: the write that granted its fence, and what followed (a withdrawal, a
 * give-back, or nothing). A change stream of the run's own client, which the scenarios'
 * fail points (aimed at the workers' appNames) never hit; after an error it resumes where it
 * was, and counts the gap.
 */
export class LockEventRecorder {
  private readonly changes = new Map<string, RecordedChange[]>();
  private stream: ChangeStream | undefined;
  private stopped = false;
  private gaps = 0;
  private readonly loop: Promise<void>;

  constructor(private readonly collection: Collection) {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.stream?.close().catch(() => undefined);
    await this.loop;
  }

  /**
   * The key's changes around the one that wrote `fence` (all of its last ones if none did),
   * one per line, times relative to that write.
   */
  around(key: string, fence: string): string {
    const changes = this.changes.get(key) ?? [];
    const written = changes.findIndex((c) => c.fence === fence);
    const from = written < 0 ? changes.length - 2 * SHOWN_AROUND : written - SHOWN_AROUND;
    const shown = changes.slice(Math.max(0, from), Math.max(0, from) + 2 * SHOWN_AROUND + 1);
    const origin = written < 0 ? (shown[0]?.receivedAt ?? 0) : changes[written].receivedAt;
    const lines = shown.map(
      (c) => `    ${formatOffset(c.receivedAt - origin)} ${c.operation} ${c.change}`,
    );
    const heading =
      `  changes of ${key} ${written < 0 ? `(none wrote fence ${fence})` : `around the write of fence ${fence}`}` +
      `${this.gaps > 0 ? `, ${this.gaps} gap(s) in the recording` : ''}:`;
    return [heading, ...lines].join('\n');
  }

  private async run(): Promise<void> {
    // Unknown until the first change (`ResumeToken` is `unknown`).
    let resumeAfter: ResumeToken;
    while (!this.stopped) {
      const stream = this.collection.watch([], {
        maxAwaitTimeMS: 500,
        ...(resumeAfter === undefined ? {} : { resumeAfter }),
      });
      this.stream = stream;
      try {
        while (!this.stopped) {
          const change = await stream.tryNext();
          if (change === null) continue;
          resumeAfter = change._id;
          this.record(change);
        }
      } catch {
        if (!this.stopped) this.gaps += 1;
      } finally {
        await stream.close().catch(() => undefined);
      }
      // A server that refuses the stream at once must not be asked again in a tight loop.
      if (!this.stopped) await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS));
    }
  }

  private record(change: ChangeStreamDocument): void {
    if (!('documentKey' in change)) return;
    const key = String((change.documentKey as Document)._id);
    const set: Document | undefined =
      'updateDescription' in change
        ? change.updateDescription?.updatedFields
        : 'fullDocument' in change
          ? change.fullDocument
          : undefined;
    const written =
      'updateDescription' in change
        ? { set, unset: change.updateDescription?.removedFields }
        : (set ?? {});
    const changes = this.changes.get(key) ?? [];
    if (changes.length >= KEPT_PER_KEY) changes.shift();
    changes.push({
      receivedAt: sharedClockMs(),
      operation: change.operationType,
      fence: set?.fence === undefined ? undefined : String(set.fence),
      change: JSON.stringify(written).slice(0, MAX_CHANGE_CHARS),
    });
    this.changes.set(key, changes);
  }
}

function formatOffset(ms: number): string {
  return `${ms >= 0 ? '+' : ''}${Math.round(ms)} ms`;
}
