import type { Subscription } from 'rxjs';
import type { LockEvent, LockService } from '../../lib';
import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { RecordedEvents, RecordedLockEvent } from './fault-protocol';

/**
 * Records what a worker's `service.events$` emits, with the shared-clock time each event
 * arrived, for a scenario to compare with the history (whose holder had which fence).
 */
export class EventRecorder {
  private subscription: Subscription | undefined;
  private events: RecordedLockEvent[] = [];
  private errors: string[] = [];
  private completed = false;
  private subscribedAt: number | null = null;
  private service: LockService | undefined;

  /** Subscribes (again, from scratch) to `events$`; only `keys` are kept when given. */
  watch(service: LockService, keys?: string[]): { subscribedAt: number } {
    this.stop();
    this.service = service;
    this.events = [];
    this.errors = [];
    this.completed = false;
    this.subscribedAt = sharedClockMs();
    const wanted = keys === undefined ? undefined : new Set(keys);
    this.subscription = service.events$.subscribe({
      next: (event: LockEvent) => {
        if (wanted && !wanted.has(event.key)) return;
        this.events.push({
          type: event.type,
          key: event.key,
          fence: event.fence === null ? null : event.fence.toString(),
          holderId: event.holderId,
          serverAt: event.at.getTime(),
          receivedAt: sharedClockMs(),
        });
      },
      error: (error: unknown) => {
        this.errors.push(
          error instanceof Error ? `${error.name}: ${error.message}` : String(error),
        );
      },
      complete: () => {
        this.completed = true;
      },
    });
    return { subscribedAt: this.subscribedAt };
  }

  /** What was recorded so far; `unsubscribe` ends the subscription. */
  take(unsubscribe: boolean): RecordedEvents {
    if (unsubscribe) this.stop();
    return {
      subscribedAt: this.subscribedAt,
      events: [...this.events],
      errors: [...this.errors],
      completed: this.completed,
      stream: this.service ? streamState(this.service) : null,
    };
  }

  stop(): void {
    this.subscription?.unsubscribe();
    this.subscription = undefined;
  }
}

/** The service's change-stream state (its internal diagnostics), for notes and messages. */
function streamState(service: LockService): RecordedEvents['stream'] {
  const { streamOpen, streamEstablished, streamsOpened } = service.diagnostics;
  return { open: streamOpen, established: streamEstablished, opened: streamsOpened };
}
