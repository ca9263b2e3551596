import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';

/**
 * What a fault proxy does to the bytes it forwards. Fields combine; `{}` is a clean pass-through.
 * A mode applies to bytes as they are forwarded, except latency, fixed when a chunk arrives.
 */
export interface ProxyMode {
  /** Each chunk, in both directions, waits `baseMs` plus up to `jitterMs` more (uniform). */
  latency?: { baseMs: number; jitterMs?: number };
  /**
   * Nothing is forwarded in either direction and nothing is closed: a partition. What happens
   * to the held bytes when the next mode has no black hole: `'release'` forwards them in order,
   * as TCP retransmission does once a short partition heals (a request the client gave up on
   * can still reach the server); `'drop'` discards them and resets every open connection, as
   * when the partition outlasts TCP's patience.
   */
  blackHole?: 'release' | 'drop';
  /**
   * Each server→client chunk, with this probability, is cut at a random byte: the part before
   * it is forwarded, then the client socket is reset (RST) and the server socket closed.
   */
  reset?: { probability: number };
  /** Server→client bytes leave in pieces of `bytes`, `delayMs` apart. */
  drip?: { bytes: number; delayMs: number };
}

/** What a pipe needs from the proxy that owns it. */
export interface PipeContext {
  mode(): ProxyMode;
  random(): number;
  forwarded(bytes: number): void;
  /** A chunk was cut: reset the connection. */
  reset(): void;
}

interface Pending {
  data: Buffer;
  dueAt: number;
  /** Whether the reset dice were rolled for this chunk (server→client only, once per chunk). */
  rolled: boolean;
  resetAfter: boolean;
}

/** Timers of all pipes still pending: a stopped proxy leaves none (its tests count them). */
let pendingTimers = 0;

export function pendingPipeTimers(): number {
  return pendingTimers;
}

/**
 * One direction of one proxied connection. Chunks leave in arrival order: each waits for its
 * due time (latency), for the end of a black hole, and for its turn in a drip. At most one
 * timer is pending per pipe. There is no backpressure: queues grow with what the source sends,
 * which for test traffic is small.
 */
export class Pipe {
  private readonly queue: Pending[] = [];
  private lastDueAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private sourceEnded = false;
  private endSent = false;
  private closed = false;

  constructor(
    private readonly to: Socket,
    /** Server→client: the direction that drips and gets cut. */
    private readonly replies: boolean,
    private readonly context: PipeContext,
  ) {}

  get hasTimer(): boolean {
    return this.timer !== undefined;
  }

  push(data: Buffer): void {
    if (this.closed) return;
    const latency = this.context.mode().latency;
    const delay = latency ? latency.baseMs + this.context.random() * (latency.jitterMs ?? 0) : 0;
    // Never before the previous chunk, so jitter cannot reorder bytes.
    this.lastDueAt = Math.max(performance.now() + delay, this.lastDueAt);
    this.queue.push({ data, dueAt: this.lastDueAt, rolled: false, resetAfter: false });
    this.pump();
  }

  /** The source will send no more: forward what is queued, then end the destination. */
  end(): void {
    this.sourceEnded = true;
    this.pump();
  }

  /** Drops whatever is queued and forwards nothing more. */
  close(): void {
    this.closed = true;
    this.queue.length = 0;
    if (this.timer) pendingTimers -= 1;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Forwards what may leave now; called on arrival, on timers and on mode changes. */
  pump(): void {
    if (this.closed || this.timer) return;
    const mode = this.context.mode();
    while (this.queue.length > 0) {
      if (mode.blackHole) return;
      if (this.to.destroyed) return this.close();
      const head = this.queue[0];
      const wait = head.dueAt - performance.now();
      if (wait > 0) return this.wakeIn(wait);
      if (this.replies && !head.rolled) this.rollReset(head, mode);
      const piece =
        this.replies && mode.drip ? head.data.subarray(0, Math.max(1, mode.drip.bytes)) : head.data;
      head.data = head.data.subarray(piece.length);
      const headDone = head.data.length === 0;
      if (headDone) this.queue.shift();
      if (headDone && head.resetAfter) return this.cutHere(piece);
      this.write(piece);
      if (this.replies && mode.drip) return this.wakeIn(mode.drip.delayMs);
    }
    if (this.sourceEnded && !this.endSent && !this.to.destroyed) {
      this.endSent = true;
      this.to.end();
    }
  }

  private rollReset(head: Pending, mode: ProxyMode): void {
    head.rolled = true;
    if (!mode.reset || this.context.random() >= mode.reset.probability) return;
    // Keep at least one byte and drop at least one, when the chunk has two.
    const length = head.data.length;
    const keep = length < 2 ? 0 : 1 + Math.floor(this.context.random() * (length - 1));
    head.data = head.data.subarray(0, keep);
    head.resetAfter = true;
  }

  /**
   * Forwards the last piece of a cut chunk, then resets. The reset waits a timer turn after the
   * write: reset from inside the write callback, Node closes with FIN instead of RST.
   */
  private cutHere(piece: Buffer): void {
    this.closed = true;
    this.context.forwarded(piece.length);
    this.to.write(piece, () => {
      if (this.to.destroyed) return;
      this.timer = this.startTimer(() => {
        this.context.reset();
      }, 0);
    });
  }

  private write(piece: Buffer): void {
    if (piece.length === 0) return;
    this.context.forwarded(piece.length);
    this.to.write(piece);
  }

  /** A pipe's one timer; counted while pending. */
  private startTimer(callback: () => void, ms: number): NodeJS.Timeout {
    pendingTimers += 1;
    return setTimeout(() => {
      pendingTimers -= 1;
      this.timer = undefined;
      callback();
    }, ms);
  }

  private wakeIn(ms: number): void {
    this.timer = this.startTimer(() => {
      this.pump();
    }, ms);
  }
}
