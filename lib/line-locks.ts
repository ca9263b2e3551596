import type { HeldLocks } from './held-locks';
import { keepRenewed, refreshEarlier } from './earlier-holds';
import { LineAcquirer } from './line-acquirer';
import type { LineAcquireRequest } from './line-attempt';
import { LineHandover } from './line-handover';
import type { LineHold } from './line-handover';
import { LockNotAcquiredError } from './errors/lock-not-acquired.error';
import { MongoLockHandle } from './lock-handle';
import { notAcquiredMessage } from './lock.messages';
import { acquireOverrunMs } from './options';
import { waitForRelease } from './release-wait';
import type { ResolvedAcquireOptions, ResolvedLockModuleOptions } from './options';
import { entryFenceOf } from './store/line/line-document';
import type { LineWatch } from './store/line/line-events';
import type { LineStorage, LineStore } from './store/line/line-store';
import type { AttemptTarget } from './store/line/line-commands';
import { lineKind } from './store/lock-modes';
import { notAcquired } from './line-refusals';
import { outsideCaller } from './util/outside-caller';
import { settlesWithin } from './util/timers';
import { LineWaiters } from './waiting/line-waiters';
import type { LockEvent } from './interfaces/lock-state.interface';

/**
 * Locks on keys: one entry per key in the key's line, keys taken one at a time in sorted
 * order, all or nothing. Owns this process's waiters and the change stream that wakes them;
 * hands out {@link MongoLockHandle}s kept in `held`.
 */
export class LineLocks<Storage extends LineStorage = LineStore> {
  private readonly waiters = new LineWaiters();
  private readonly handover: LineHandover;
  private readonly acquirer: LineAcquirer;
  private watch: LineWatch | undefined;
  /** Whether the change stream carries the lines' news (it wakes waits); false: waiters poll. */
  streamOpen = false;
  /** How many times the change stream was opened (a stream that keeps failing counts up). */
  streamsOpened = 0;
  /** The `events$` stream, open while anyone listens. */
  private eventWatch: LineWatch | undefined;
  /** Whether `events$` carries every change now (open, and no failure since). */
  eventsFlowing = false;
  private readonly eventListeners = new Set<(event: LockEvent) => void>();
  /** The calls here still taking their keys, each with those of its keys operator news named. */
  private readonly takingCalls = new Set<TakingCall>();

  constructor(
    readonly store: Storage,
    private readonly held: HeldLocks,
    private readonly options: ResolvedLockModuleOptions,
  ) {
    this.handover = new LineHandover(options.localHandOff);
    this.acquirer = new LineAcquirer({
      store,
      waiters: this.waiters,
      handover: this.handover,
      holderId: options.holderId,
      lateReplyMs: acquireOverrunMs(options.operationTimeoutMs),
      polling: () =>
        this.streamOpen
          ? undefined
          : { firstMs: options.pollIntervalMs, maxMs: options.maxPollIntervalMs },
    });
  }

  /**
   * Opens the change stream unless `changeStreams: 'off'` (a standalone server has none); waits
   * for it until monotonic time `endsAt` (default: `operationTimeoutMs` from now).
   */
  async start(endsAt = performance.now() + this.options.operationTimeoutMs): Promise<void> {
    if (this.options.changeStreams === 'off' || this.watch) return;
    let failed = false;
    const watch = this.store.watch(
      this.options.holderId,
      (change) => {
        this.waiters.heard(change.key, change.holders, change.news);
        if (change.lookAgain) this.waiters.lookAgain(change.key);
        if (change.byOperator) {
          this.operatorChanged(change.key);
          void this.tellRemovedHolders(change.key);
        }
      },
      () => {
        failed = true;
        this.streamOpen = false;
        this.waiters.lookAgain();
      },
      () => {
        this.streamsOpened += 1;
        if (this.streamOpen) return;
        // (Re)opened: news from before may have been missed; none is from now on.
        this.streamOpen = true;
        this.waiters.lookAgain();
      },
    );
    this.watch = watch;
    // Not open in time, or failed first: waiters poll until the stream carries a change.
    const opened = await settlesWithin(watch.opened, endsAt - performance.now());
    // Closed meanwhile (a close() during the start): it stays closed.
    if (this.watch !== watch) return;
    this.streamOpen = opened && !failed;
  }

  /** Callers waiting in this process: in a key's line (but `uncounted` keys'), or queued here. */
  waiting(uncounted?: (key: string) => boolean): number {
    return this.waiters.count(uncounted) + this.handover.size;
  }

  /**
   * Before an operator command removes `key`'s holders: our entry on it is handed on no more
   * (queued callers join the line), and our leaves of it, a kept entry's too, wait until the
   * returned function is called, once the command is answered or failed (`LineLeaves.holdBack`).
   */
  beforeForceRelease(key: string): () => void {
    // The barrier first: closing the key makes a kept entry of ours leave.
    const leavesHeld = this.acquirer.leaves.holdBack(key);
    const reopen = this.handover.closeKey(key);
    return () => {
      leavesHeld();
      reopen();
      // Answered or not: a command whose reply was lost may have landed.
      this.operatorChanged(key);
    };
  }

  /**
   * Before `releaseScope`: our leaves of `keys` (its holders' here) wait until the returned
   * function is called, once the command is answered. A leave first could make a waiter of the
   * scope elsewhere holder, whose entry the command would then remove without telling it.
   */
  beforeScopeRelease(keys: Iterable<string>): () => void {
    const released = [...new Set(keys)].map((key) => this.acquirer.leaves.holdBack(key));
    return () => {
      for (const release of released) release();
    };
  }

  /**
   * An operator's command (`forceRelease`, `releaseScope`) changed `key`'s line, here or (heard
   * by its news) in another instance: a call here still taking `key` may hold an entry it
   * removed, taken before the news came or answered after. It renews that hold before hand-out,
   * which finds a removed entry gone, and takes the key again.
   */
  operatorChanged(key: string): void {
    for (const call of this.takingCalls) if (call.keys.includes(key)) call.named.add(key);
  }

  /**
   * After an operator's command on `key` (here or in another instance): our holders of it whose
   * entry it removed are told now, by reads in parallel (the last within a round trip of the
   * first, however many shared holders), rather than at their next renewal.
   */
  private async tellRemovedHolders(key: string): Promise<void> {
    const tell = async (handle: MongoLockHandle) => {
      const owner = handle.heldKeys.find((held) => held.key === key)?.owner;
      const fence = handle.fences.get(key);
      if (owner === undefined || fence === undefined) return;
      const place = await this.store.place(key, owner).catch(() => null);
      // Unanswered: its next renewal decides. A token's later entry is not this hold's.
      if (place === null || place?.fence === entryFenceOf(fence)) return;
      void handle.revoke('an operator released it (forceRelease or releaseScope)', undefined, key);
    };
    await Promise.all([...this.held.holding(key, this)].map(tell));
  }

  async acquire(
    keys: string[],
    options: ResolvedAcquireOptions,
    signal: AbortSignal,
    startedAt: number,
  ): Promise<MongoLockHandle> {
    const deadline = startedAt + options.timeoutMs;
    // Past its deadline a call still waits this long for replies on their way.
    const callEnd = deadline + acquireOverrunMs(this.options.operationTimeoutMs);
    const holds: LineHold[] = [];
    // From before any join is sent: news of a key may come before the reply that holds it.
    const call: TakingCall = { keys, named: new Set() };
    this.takingCalls.add(call);
    let stopRenewing: (() => void) | undefined;
    try {
      for (;;) {
        for (const key of keys.slice(holds.length)) {
          // The keys taken are kept renewed while a later one is awaited.
          stopRenewing =
            holds.length > 0 ? keepRenewed(this.acquirer, holds, options.ttlMs) : undefined;
          holds.push(await this.acquirer.acquire(requestFor(key, options, signal, deadline)));
          stopRenewing?.();
        }
        signal.throwIfAborted();
        // A renewal may have ended for good, or the last wait run an earlier lease short, and an
        // operator may have removed a hold (news named its key): those are renewed before
        // hand-out. Aborted meanwhile (a close, the caller's signal): at once, and nobody is
        // handed the lock.
        const lost = await refreshEarlier(
          this.acquirer,
          holds,
          options.ttlMs,
          call.named,
          callEnd,
          signal,
        );
        signal.throwIfAborted();
        // No news since, checked with no await before the handle is made: later news finds it
        // in `held` (`tellRemovedHolders`, `forceReleaseKey`).
        if (lost === undefined && call.named.size === 0) break;
        // A stall outlived a lease (or an operator removed it) before the lock was handed out:
        // nothing was protected yet.
        if (lost !== undefined) {
          const key = holds[lost].key;
          for (const hold of holds.splice(lost)) void this.acquirer.giveBack(hold);
          // Taken again only within the call's time: a join sent later could not be answered.
          if (performance.now() >= deadline) throw notAcquired({ key, ...options });
        }
      }
    } catch (error) {
      stopRenewing?.();
      // All or nothing: the keys taken are given back before the call fails, by its end (what
      // is not answered by then goes on in the background).
      const givingBack = holds.map((hold) => this.acquirer.giveBack(hold));
      await settlesWithin(Promise.all(givingBack), callEnd - performance.now());
      throw withAllKeys(error, keys, options.timeoutMs);
    } finally {
      this.takingCalls.delete(call);
    }
    return this.handleFor(holds, options);
  }

  /**
   * One document's lock (the storage keeps lines in documents, `target` its conditions): the
   * handle, and the hold, with the document when the write that made it hold read it.
   */
  async acquireDocument(
    key: string,
    options: ResolvedAcquireOptions,
    signal: AbortSignal,
    startedAt: number,
    target: AttemptTarget | undefined,
  ): Promise<{ handle: MongoLockHandle; hold: LineHold }> {
    const request = requestFor(key, options, signal, startedAt + options.timeoutMs);
    const hold = await this.acquirer.acquire({ ...request, target });
    if (signal.aborted) {
      void this.acquirer.giveBack(hold);
      throw signal.reason;
    }
    return { handle: this.handleFor([hold], options), hold };
  }

  /**
   * Every acquisition, release and deletion on the collection while `listener` listens (one
   * shared stream; none with `changeStreams: 'off'`).
   */
  watchEvents(listener: (event: LockEvent) => void): () => void {
    this.eventListeners.add(listener);
    if (!this.eventWatch && this.options.changeStreams !== 'off') {
      // Shared by every listener, for as long as one listens: in no caller's context.
      const watch = outsideCaller(() =>
        this.store.watchEvents(
          (event) => {
            for (const each of [...this.eventListeners]) each(event);
          },
          () => (this.eventsFlowing = false),
          // Flowing while open; after a failure, readers of `eventsFlowing` poll until it reopens.
          () => {
            if (this.eventWatch === watch) this.eventsFlowing = true;
          },
        ),
      );
      this.eventWatch = watch;
      this.eventsFlowing = false;
    }
    return () => {
      this.eventListeners.delete(listener);
      if (this.eventListeners.size > 0 || !this.eventWatch) return;
      this.eventWatch.close().catch(() => undefined);
      this.eventWatch = undefined;
      this.eventsFlowing = false;
    };
  }

  /** Resolves once `key` is free (`release-wait.ts`). Takes no lock. */
  waitForRelease(key: string, signal: AbortSignal): Promise<void> {
    return waitForRelease(key, signal, {
      store: this.store,
      waiters: this.waiters,
      options: this.options,
      watchEvents: (listener) => this.watchEvents(listener),
      eventsOpened: () => this.eventWatch?.opened,
      streamOpen: () => this.streamOpen,
    });
  }

  /** Settles background leaves and closes the change streams; running waits end by their timers. */
  async close(): Promise<void> {
    this.streamOpen = false;
    const watch = this.watch;
    this.watch = undefined;
    const events = this.eventWatch;
    this.eventWatch = undefined;
    this.eventsFlowing = false;
    this.eventListeners.clear();
    // Give-backs and late wins still on their way are left before the client closes.
    await Promise.all([this.acquirer.leavesSettled(), watch?.close(), events?.close()]);
  }

  private handleFor(holds: LineHold[], options: ResolvedAcquireOptions): MongoLockHandle {
    const tokens = new Map(holds.map((hold) => [hold.key, hold]));
    const holdOf = (key: string) => tokens.get(key) as LineHold;
    const handle = new MongoLockHandle({
      scope: options.scope,
      mode: options.mode,
      held: holds.map(({ key, token, fence }) => ({ key, owner: token, fence })),
      leaseEnd: Math.min(...holds.map((hold) => hold.leaseEnd)),
      ttlMs: options.ttlMs,
      renew: options.renew,
      renewalIntervalRatio: options.renewalIntervalRatio,
      maxHoldMs: options.maxHoldMs ?? this.options.maxHoldMs,
      operations: {
        renew: async (held, ttlMs, exactly) => {
          const sentAt = performance.now();
          const renewed = await this.acquirer.renew(holdOf(held.key), ttlMs, exactly);
          return renewed ? { renewed: true, sentAt, ...renewed } : { renewed: false, sentAt };
        },
        // Handed to a caller here queued behind it when the keeper knows the lease is ours.
        release: async (held, lease) =>
          (await this.acquirer.release(holdOf(held.key), lease)) ? 'released' : 'lost',
        // Left in the background from the first try (`close()` waits for it), retried until the
        // lease ends; settles when a leave is answered, so a caller bounding it knows if it landed.
        giveBack: async (held, lease) => {
          const left = await this.acquirer.giveBack(holdOf(held.key), lease);
          return left === undefined ? undefined : left ? 'released' : 'lost';
        },
        // A commit ended it: a late join of the call is left again.
        ended: (held) => this.acquirer.leaves.ended(holdOf(held.key)),
      },
    });
    this.held.add(handle, this);
    return handle;
  }
}

/** A call still taking its keys: the keys that operator news named since it began. */
interface TakingCall {
  keys: readonly string[];
  named: Set<string>;
}

function requestFor(
  key: string,
  options: ResolvedAcquireOptions,
  signal: AbortSignal,
  deadline: number,
): LineAcquireRequest {
  return {
    key,
    kind: lineKind(options.mode),
    ttlMs: options.ttlMs,
    timeoutMs: options.timeoutMs,
    deadline,
    signal,
    ...(options.scope === undefined ? {} : { scope: options.scope }),
    ...(options.handOff === false ? { handOff: false } : {}),
    ...(options.queued ? { queued: options.queued } : {}),
  };
}

/** A multi-key acquisition reports all its keys, with the blocking key's holder. */
function withAllKeys(error: unknown, keys: string[], timeoutMs: number): unknown {
  if (!(error instanceof LockNotAcquiredError) || keys.length === 1) return error;
  return new LockNotAcquiredError(
    notAcquiredMessage(keys, timeoutMs, error.holderId, error.retryAfterMs),
    { keys, retryAfterMs: error.retryAfterMs, holderId: error.holderId, cause: error },
  );
}
