import type { ChangeStreamDocument, ResumeToken, Timestamp } from 'mongodb';
import { LockStoreUnavailableError } from '../errors/lock-store-unavailable.error';
import type { LockEvent } from '../interfaces/lock-state.interface';
import type { LockChangeStream, LockDocument } from '../store/lock-document';
import type { LockChangeScope, OpenLockChangeStreamOptions } from '../store/lock-change-stream';
import { isChangeStreamUnsupportedError, isResumePointLostError } from '../store/mongo-error-codes';
import { readLockChange } from './lock-event';
import type { GrantNews, LockChange, ReadChange } from './lock-event';
import type { WaitLogger } from './wait-logger';
import { settlesWithin } from '../util/timers';

/**
 * Why a key watcher is called: the key was released (seen on the change stream), handed to
 * this process (`granted`, see `direct-grant.ts`; also told at once when this process's own
 * release granted it here), this process's own release freed it (`released-here`, told at
 * once, before the stream says so) or handed it to another process (`granted-elsewhere`), this
 * process's hold ended without freeing it (`ended-here`: it had been lost), or an event may
 * have been missed and the caller must look again.
 */
export type KeySignal =
  'released' | 'granted' | 'released-here' | 'granted-elsewhere' | 'ended-here' | 'recheck';
/** `grant`: with `granted`, what was heard of the grant (when the change said). */
export type KeyWatcher = (signal: KeySignal, grant?: GrantNews) => void;

/**
 * Runs `task` as a microtask, by a promise continuation: Jest's fake timers hold back
 * `queueMicrotask`, and the testing module's waits must go on under them.
 */
function soon(task: () => void): void {
  void Promise.resolve().then(task);
}

/**
 * How this process's hold ended: its release freed the key, granted it to this process's own
 * place in line, handed it to another process, or it was lost.
 */
export type HoldEnd = 'freed' | 'granted-here' | 'granted-elsewhere' | 'lost';

/** How many keys' latest release times the feed remembers for watchers that come late. */
const RECENT_RELEASES_KEPT = 10_000;

interface ActiveStream {
  readonly stream: LockChangeStream;
  readonly scope: LockChangeScope;
  /** The server time the stream starts at, when we chose it. */
  readonly startAt: Timestamp | undefined;
  established: boolean;
  /** Called once the stream runs, for watchers whose coverage could not be proven before. */
  readonly onEstablished: Set<KeyWatcher>;
  readonly openedAt: number;
}

/** Kept short: waiters have no stream until it reopens (their safety poll is slower still). */
const REOPEN_DELAY_MS = [50, 200, 500, 1_000];
/**
 * A stream that answered and failed after running this long starts a new run of failures. One
 * that fails sooner continues the run, even if it answered: a server whose getMore fails after every
 * successful open (whose first batch may bring changes) gets the growing delay, not a loop.
 */
const STREAM_PROVEN_MS = 1_000;

/** Stops waiting for a close that does not answer (a server that is gone). */
const CLOSE_WAIT_MS = 1_000;

function later(a: Timestamp, b: Timestamp | undefined): boolean {
  return b === undefined || a.compare(b) > 0;
}

/**
 * ONE change stream per `LockService`, shared by every waiter and `events$` subscriber.
 * Opened when the first watcher appears, closed `idleMs` after the last one goes (a process
 * that waits again meanwhile finds it running), filtered on the server, fanned out by key.
 * Where change streams are unavailable it switches to polling mode once (and says so once);
 * watchers then only hear local releases and must poll.
 */
export class LockChangeFeed {
  /** Per key, each watcher with the server time it has seen up to (older events are stale). */
  private readonly keyWatchers = new Map<string, Map<KeyWatcher, Timestamp | undefined>>();
  /**
   * Latest release time per key, so that a watcher whose attempt was answered after the
   * release was streamed still hears of it; {@link forgottenBefore} bounds what was dropped.
   */
  private readonly recentReleases = new Map<string, Timestamp>();
  private forgottenBefore: Timestamp | undefined;
  private readonly eventListeners = new Set<(event: LockEvent) => void>();
  private active: ActiveStream | undefined;
  private pollingReason: string | undefined;
  private pollingAnnounced = false;
  private failuresInARow = 0;
  private reopenTimer: NodeJS.Timeout | undefined;
  /** Closes the stream nobody watches any more, unless a watcher comes first. */
  private idleTimer: NodeJS.Timeout | undefined;
  /**
   * Where a reopened stream continues, across any number of failures in a row: after the
   * last event seen, or where the failed stream started. Dropped only when the server says it
   * cannot resume from there, or when nobody watches any more.
   */
  private resumePoint:
    { resumeAfter: ResumeToken } | { startAtOperationTime: Timestamp } | undefined;
  private readonly closing = new Set<Promise<void>>();
  private opened = 0;

  constructor(
    private readonly openStream: (options: OpenLockChangeStreamOptions) => LockChangeStream,
    private readonly logger: WaitLogger,
    changeStreams: 'auto' | 'off',
    /** A getMore unanswered this long past its await time counts as a stream failure. */
    private readonly stallTimeoutMs = 10_000,
    /** Reads a change: the lock collection's (for this process), or a document lock field's. */
    private readonly readChange: (change: LockChange) => ReadChange = readLockChange(undefined),
    /** How long a stream nobody watches stays open (`streamIdleMs`). */
    private readonly idleMs = 0,
  ) {
    if (changeStreams === 'off') this.pollingReason = "option changeStreams is 'off'";
  }

  /** False once the feed polls: waiters then re-try on a backoff instead of waiting for events. */
  get streaming(): boolean {
    return this.pollingReason === undefined;
  }

  /** Streams opened so far (diagnostics and tests). */
  get streamsOpened(): number {
    return this.opened;
  }

  get streamOpen(): boolean {
    return this.active !== undefined;
  }

  /** The open stream has answered once, so events from now on will arrive. */
  get streamEstablished(): boolean {
    return this.active?.established ?? false;
  }

  /**
   * Calls `watcher('released')` when `key` is released or deleted, and `watcher('recheck')`
   * when an event may have been missed. `attemptTime` is the operationTime of the attempt
   * that found the key held; events after it are guaranteed to arrive.
   */
  watchKey(key: string, watcher: KeyWatcher, attemptTime: Timestamp | undefined): () => void {
    let watchers = this.keyWatchers.get(key);
    if (!watchers)
      this.keyWatchers.set(key, (watchers = new Map<KeyWatcher, Timestamp | undefined>()));
    watchers.set(watcher, attemptTime);
    if (this.streaming) this.cover(key, watcher, attemptTime);
    else this.announcePolling();
    return () => {
      watchers.delete(watcher);
      if (watchers.size === 0 && this.keyWatchers.get(key) === watchers)
        this.keyWatchers.delete(key);
      this.active?.onEstablished.delete(watcher);
      this.stopIfUnused();
    };
  }

  /** Every acquisition and release seen on the collection. */
  watchEvents(listener: (event: LockEvent) => void): () => void {
    this.eventListeners.add(listener);
    if (!this.streaming) this.announcePolling();
    // While a failed stream waits to reopen, the reopened one (with its resume token) will
    // report ownership too, since listeners exist by then.
    else if (!this.active && !this.reopenTimer) this.open({}, undefined);
    else if (this.active?.scope === 'releases') this.widen(this.active);
    return () => {
      this.eventListeners.delete(listener);
      this.stopIfUnused();
    };
  }

  /**
   * A hold of this process ended: wake local waiters without waiting for the stream. With a
   * grant, `grantFence` (a lower bound of its fence) lets a watcher that took it already tell.
   */
  notifyHoldEnded(key: string, how: HoldEnd, grantFence?: bigint): void {
    const signal = {
      freed: 'released-here',
      'granted-here': 'granted',
      lost: 'ended-here',
      'granted-elsewhere': 'granted-elsewhere',
    } as const;
    this.signalKey(
      key,
      signal[how],
      undefined,
      grantFence === undefined ? undefined : { fence: grantFence },
    );
  }

  async close(): Promise<void> {
    this.keyWatchers.clear();
    this.eventListeners.clear();
    this.stopIfUnused(0);
    await settlesWithin(Promise.all([...this.closing]), CLOSE_WAIT_MS);
  }

  private cover(key: string, watcher: KeyWatcher, attemptTime: Timestamp | undefined): void {
    if (attemptTime) {
      const released = this.recentReleases.get(key);
      // Streamed before the watcher came: tell it now.
      if (released && released.compare(attemptTime) > 0) {
        soon(() => watcher('released'));
        return;
      }
      if (this.forgottenBefore && attemptTime.compare(this.forgottenBefore) <= 0) {
        soon(() => watcher('recheck'));
        return;
      }
    }
    const active = this.active;
    if (!active) {
      if (this.reopenTimer) return; // The reopened stream wakes everyone.
      const opened = this.open({ startAtOperationTime: attemptTime }, attemptTime);
      if (!attemptTime) opened?.onEstablished.add(watcher);
      return;
    }
    if (attemptTime && active.startAt && attemptTime.compare(active.startAt) >= 0) return;
    // The stream may start after the attempt: look again once it surely runs. A stream that
    // starts at a known time covers any attempt made from now on.
    if (active.startAt) soon(() => watcher('recheck'));
    else if (active.established) soon(() => watcher('recheck'));
    else active.onEstablished.add(watcher);
  }

  /** Says once per feed why waits poll: it changes latency and silences events$. */
  private announcePolling(): void {
    if (this.pollingAnnounced) return;
    this.pollingAnnounced = true;
    this.logger.warn(
      `Waiting for locks by polling: ${this.pollingReason}. Releases are noticed within the ` +
        'polling interval instead of at once, and events$ emits nothing.',
    );
  }

  /**
   * Replaces a waiters-only stream with one that also reports acquisitions, continuing
   * where it stood, so waiters miss nothing.
   */
  private widen(active: ActiveStream): void {
    const resumeToken: ResumeToken = active.stream.resumeToken;
    this.active = undefined;
    this.closeQuietly(active.stream);
    const reopened = this.open(
      resumeToken ? { resumeAfter: resumeToken } : { startAtOperationTime: active.startAt },
      resumeToken ? undefined : active.startAt,
    );
    // Re-checks the old stream still owed (it had not run yet) are owed by the new one.
    if (reopened) for (const watcher of active.onEstablished) reopened.onEstablished.add(watcher);
    if (reopened && active.established) reopened.established = true;
  }

  private hasWatchers(): boolean {
    return this.keyWatchers.size > 0 || this.eventListeners.size > 0;
  }

  private open(
    options: OpenLockChangeStreamOptions,
    startAt: Timestamp | undefined,
  ): ActiveStream | undefined {
    let stream: LockChangeStream;
    // Waiters need only releases; acquisitions and document look-ups cost every process a
    // round trip per event, so they are asked for only while someone reads events$.
    const scope: LockChangeScope = this.eventListeners.size > 0 ? 'ownership' : 'releases';
    try {
      stream = this.openStream({ ...options, scope });
    } catch (error) {
      this.onStreamError(error, undefined);
      return undefined;
    }
    this.opened += 1;
    const active: ActiveStream = {
      stream,
      scope,
      startAt,
      established: false,
      onEstablished: new Set(),
      openedAt: performance.now(),
    };
    this.active = active;
    void this.pump(active);
    return active;
  }

  private async pump(active: ActiveStream): Promise<void> {
    try {
      while (this.active === active) {
        const change = await this.nextOrStall(active.stream);
        if (this.active !== active) return;
        if (!active.established) this.markEstablished(active);
        if (change) this.dispatch(change);
      }
    } catch (error) {
      if (this.active === active) this.onStreamError(error, active);
    }
  }

  private markEstablished(active: ActiveStream): void {
    active.established = true;
    const watchers = [...active.onEstablished];
    active.onEstablished.clear();
    for (const watcher of watchers) watcher('recheck');
  }

  /** The stream's next change; a getMore that a silent server never answers fails it. */
  private async nextOrStall(
    stream: LockChangeStream,
  ): Promise<ChangeStreamDocument<LockDocument> | null> {
    let timer: NodeJS.Timeout | undefined;
    const stalled = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new LockStoreUnavailableError('The lock change stream stopped answering')),
        this.stallTimeoutMs,
      );
    });
    try {
      return await Promise.race([stream.tryNext(), stalled]);
    } finally {
      clearTimeout(timer);
    }
  }

  private dispatch(change: ChangeStreamDocument<LockDocument>): void {
    const { key, events, signal, grant } = this.readChange(change);
    const at = 'clusterTime' in change ? change.clusterTime : undefined;
    if (signal && key !== undefined) {
      // A grant to us counts as a release for a watcher that comes late: it must look.
      if (at) this.rememberRelease(key, at);
      this.signalKey(key, signal, at, grant && at ? { ...grant, at } : grant);
    }
    for (const event of events) for (const listener of [...this.eventListeners]) listener(event);
  }

  private rememberRelease(key: string, at: Timestamp): void {
    this.recentReleases.delete(key);
    this.recentReleases.set(key, at);
    if (this.recentReleases.size <= RECENT_RELEASES_KEPT) return;
    const [oldestKey, oldestAt] = this.recentReleases.entries().next().value as [string, Timestamp];
    this.recentReleases.delete(oldestKey);
    if (later(oldestAt, this.forgottenBefore)) this.forgottenBefore = oldestAt;
  }

  /** Calls the key's watchers; a streamed event no newer than what a watcher saw is stale. */
  private signalKey(
    key: string,
    signal: KeySignal,
    at: Timestamp | undefined,
    grant?: GrantNews,
  ): void {
    for (const [watcher, seenUpTo] of [...(this.keyWatchers.get(key) ?? [])]) {
      if (at && seenUpTo && at.compare(seenUpTo) <= 0) continue;
      watcher(signal, grant);
    }
  }

  private recheckAll(): void {
    for (const watchers of [...this.keyWatchers.values()]) {
      for (const watcher of [...watchers.keys()]) watcher('recheck');
    }
  }

  private onStreamError(error: unknown, active: ActiveStream | undefined): void {
    const resumeToken: ResumeToken = active?.stream.resumeToken;
    if (resumeToken) this.resumePoint = { resumeAfter: resumeToken };
    else if (!this.resumePoint && active?.startAt) {
      this.resumePoint = { startAtOperationTime: active.startAt };
    }
    if (isResumePointLostError(error) && this.resumePoint) {
      this.resumePoint = undefined;
      if (this.eventListeners.size > 0) {
        this.logger.warn('Lock change stream could not resume: events$ may have missed events');
      }
    }
    this.active = undefined;
    if (active) this.closeQuietly(active.stream);
    if (!this.hasWatchers() && !isChangeStreamUnsupportedError(error)) {
      // An idle stream (see `idleMs`) failed: the next watcher opens a new one.
      this.resumePoint = undefined;
      return;
    }
    if (isChangeStreamUnsupportedError(error)) {
      this.pollingReason = 'the server does not support change streams (a standalone mongod?)';
      this.announcePolling();
      this.recheckAll();
      return;
    }
    // Only a stream that answered counts: one that waited for an unreachable server all along
    // (its first read stalled) continues the run, or an outage would warn at every stall and
    // reopen after the shortest delay each time.
    if (active?.established && performance.now() - active.openedAt >= STREAM_PROVEN_MS) {
      this.failuresInARow = 0;
    }
    this.failuresInARow += 1;
    const message = error instanceof Error ? error.message : String(error);
    if (this.failuresInARow === 1)
      this.logger.warn(`Lock change stream failed, reopening: ${message}`);
    const delay = REOPEN_DELAY_MS[Math.min(this.failuresInARow, REOPEN_DELAY_MS.length) - 1];
    this.reopenTimer = setTimeout(() => {
      this.reopenTimer = undefined;
      if (!this.hasWatchers() || this.active || !this.streaming) return;
      const point = this.resumePoint;
      const reopened = this.open(
        point ?? {},
        point && 'startAtOperationTime' in point ? point.startAtOperationTime : undefined,
      );
      // Events may have been lost in between: every watcher looks again once it runs.
      for (const watchers of this.keyWatchers.values()) {
        for (const watcher of watchers.keys()) reopened?.onEstablished.add(watcher);
      }
    }, delay);
  }

  /** With nobody watching: closes the stream after `idleMs`, if still nobody watches then. */
  private stopIfUnused(idleMs = this.idleMs): void {
    if (this.hasWatchers()) return;
    if (this.reopenTimer) clearTimeout(this.reopenTimer);
    this.reopenTimer = undefined;
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    const active = this.active;
    if (active && idleMs > 0) {
      // Still read meanwhile: releases it reports stay known to watchers that come later. A
      // watcher that comes first keeps it (the timer finds it watched).
      this.idleTimer = setTimeout(() => {
        this.idleTimer = undefined;
        if (this.active === active) this.stopIfUnused(0);
      }, idleMs);
      this.idleTimer.unref();
      return;
    }
    this.active = undefined;
    this.resumePoint = undefined;
    // A stream that ran until nobody needed it ends any run of failures.
    if (active?.established) this.failuresInARow = 0;
    if (active) this.closeQuietly(active.stream);
  }

  private closeQuietly(stream: LockChangeStream): void {
    const closing = stream.close().catch(() => undefined);
    this.closing.add(closing);
    void closing.finally(() => this.closing.delete(closing));
  }
}
