import { CallOrder } from './call-order';
import { localLeaseEnd } from './lease-keeper';
import type { HandableLease } from './lease-keeper';
import { LineAttempt } from './line-attempt';
import type { LineAcquireRequest } from './line-attempt';
import { EntryFollowers } from './line-handover';
import type { LineHandover, LineHold } from './line-handover';
import { LineLeaves } from './line-leaves';
import { joinRefused, wroteNothing } from './line-refusals';
import type { HeldDocument, JoinRequest } from './store/line/line-commands';
import type { LinePlace } from './store/line/line-document';
import { entryFenceOf } from './store/line/line-document';
import type { LineStorage } from './store/line/line-store';
import { isStoreUnavailableError } from './store/mongo-error-codes';
import { settledBy, wakeUp } from './util/timers';
import type { LineWaiters } from './waiting/line-waiters';

/**
 * Engine v2's acquisition of one key, ownership by position: join the key's line in one write;
 * hold at once if the reply says so, else wait for a change event or a release here to say so.
 * Renewing our entry keeps it alive while it waits and confirms a lease ahead that ran out (the
 * renewal drops dead entries and says where we stand). Without a change stream, it polls.
 */

export interface LineAcquirerDeps {
  store: LineStorage;
  waiters: LineWaiters;
  handover: LineHandover;
  holderId: string;
  /** Poll backoff, doubling up to `maxMs`, while no change stream carries news; else undefined. */
  polling?: () => { firstMs: number; maxMs: number } | undefined;
  /** Ms past its deadline a call waits for a reply on its way (default: a try the bound, else 0). */
  lateReplyMs?: number;
}

/** Whether a request may take over an entry of ours (`line-handover.ts`): an unscoped mutex. */
function takesOver(request: LineAcquireRequest): boolean {
  const { kind, scope, target, handOff } = request;
  return kind.mode === 'exclusive' && scope === undefined && !target && handOff !== false;
}

/** Whether a request waits its turn behind earlier callers here: a mutex's wait. */
function inCallOrder(request: LineAcquireRequest): boolean {
  return request.timeoutMs > 0 && request.kind.mode === 'exclusive';
}

export class LineAcquirer {
  /** The line serves this process's mutex waits on a key in the order they called. */
  private readonly joinsInCallOrder = new CallOrder();
  /** Per key, since when the front caller of `joinsInCallOrder` has been asking MongoDB. */
  private readonly frontSince = new Map<string, number>();
  /** Our leaves, the background ones too: `LineLocks` holds them back around operator commands. */
  readonly leaves: LineLeaves;

  constructor(private readonly deps: LineAcquirerDeps) {
    this.leaves = new LineLeaves(deps.store, deps.waiters);
  }

  async acquire(request: LineAcquireRequest): Promise<LineHold> {
    const deadline = request.deadline ?? performance.now() + request.timeoutMs;
    const attempt = new LineAttempt(request, deadline, this.deps.waiters);
    try {
      for (;;) {
        // News that may have been missed (`lookAgain`) since this stamp wakes the wait.
        const looked = this.deps.waiters.stamp(request.key);
        const joined = await this.join(attempt);
        if ('following' in joined) {
          // Queued behind an entry of ours: handed it over, or told to join ourselves.
          const handed = await joined.following;
          if (handed instanceof EntryFollowers) attempt.opens = handed;
          else if (handed) return handed;
          continue;
        }
        if (!attempt.place && !joined.holds) request.queued?.();
        attempt.placed(joined);
        // Callers here may queue behind a mutex's entry (`line-handover.ts`).
        attempt.followers =
          inCallOrder(request) && takesOver(request)
            ? this.deps.handover.opened(request.key, joined.holds, attempt.opens)
            : undefined;
        attempt.opens = undefined;
        const held = await this.waitInLine(attempt, looked);
        if (held) return held;
        // Our entry ran out (a long stall): rejoin at the back, followers too, by a new token. A
        // late join of the old token would make a nobody's entry: left once it lands (below).
        this.deps.handover.dissolved(attempt.followers);
        attempt.followers = undefined;
        this.leaves.ended({ key: request.key, token: attempt.entry.token, ttlMs: request.ttlMs });
        attempt.entry.renewToken();
      }
    } catch (error) {
      this.deps.handover.dissolved(attempt.followers ?? attempt.opens);
      const { entry } = attempt;
      // Any write of ours was sent before now, so our entry, if any, ends within ttlMs.
      if (entry.state !== 'none') {
        const hold = { key: request.key, token: entry.token, ttlMs: request.ttlMs };
        const until = performance.now() + request.ttlMs;
        const leaving = this.leaves.inBackground(hold.key, hold.token, until, entry.state);
        // A join of ours still on its way may land after that leave: left again once it has.
        void leaving.then(() => this.leaves.ended(hold));
      }
      throw error;
    } finally {
      attempt.entry.stopListening();
    }
  }

  /** From the place our join gave: the hold, or undefined if our entry ran out. */
  private async waitInLine(attempt: LineAttempt, looked: number): Promise<LineHold | undefined> {
    const { request, entry, deadline } = attempt;
    // When the write that gave `place` was sent (first: `joinSentAt`): its times count from then.
    let sentAt = attempt.joinSentAt;
    const { key, ttlMs } = request;
    let place = attempt.place!;
    let pollMs: number | undefined;
    for (;;) {
      const leaseEnd = localLeaseEnd(sentAt, place.remainingMs, ttlMs);
      if (place.holds) {
        if (leaseEnd > performance.now()) return this.hold(attempt, leaseEnd);
        // Read after our lease ended (a late reply, a stall), it proves nothing: rejoin. By the
        // server clock the entry may live on (a late join's lease starts as it runs): left.
        void this.leaves.inBackground(key, entry.token, performance.now() + ttlMs, 'joined');
        return undefined;
      }
      // Renew when the first lease ahead ends (to confirm it) or a third of ours has run, as a
      // holder does (by our own remaining lease: a poll's read renews nothing).
      const renewAt =
        sentAt + Math.max(0, Math.min(place.aheadEndsInMs, place.remainingMs - (2 * ttlMs) / 3));
      const polling = this.deps.polling?.();
      pollMs = polling ? Math.min((pollMs ?? polling.firstMs / 2) * 2, polling.maxMs) : undefined;
      const pollAt = pollMs === undefined ? Infinity : performance.now() + pollMs;
      const polls = pollAt < Math.min(renewAt, deadline);
      const nudge = this.deps.waiters.nudged(key, looked);
      const woke = await wakeUp(
        { heard: entry.listen().heardAs(place.fence), nudged: nudge.nudged },
        Math.min(renewAt, deadline, pollAt),
        request.signal,
      ).finally(nudge.cancel);
      if (woke === 'aborted') throw request.signal?.reason;
      // Heard to hold: trusted while over a third of our lease is left; else renewal confirms.
      if (woke === 'heard' && leaseEnd - performance.now() > ttlMs / 3) {
        const heard = (await entry.listen().heardAs(place.fence)) as HeldDocument | undefined;
        return this.hold(attempt, leaseEnd, heard);
      }
      const now = performance.now();
      if (now >= deadline) throw attempt.timedOut();
      sentAt = now;
      if (woke === 'nudged' || (woke === 'timer' && polls)) {
        // A look without a write: polling, or the stream was reopened and may have missed news.
        looked = this.deps.waiters.stamp(key);
        const seen = await this.send(attempt, () => this.deps.store.place(key, entry.token));
        // A read that finds us holding is confirmed by the renewal's write below: entries ahead
        // may have ended by time alone, and a transaction under the last of them may yet commit.
        if (seen && !seen.holds) {
          place = seen;
          attempt.placed(place);
          continue;
        }
      }
      // A renewal makes no entry: ours stays known joined, whatever its reply (or none).
      looked = this.deps.waiters.stamp(key);
      const renewed = await this.send(attempt, () =>
        this.deps.store.renew(key, entry.token, ttlMs),
      );
      if (!renewed.renewed) return undefined;
      if (performance.now() >= leaseEnd) {
        // Answered after our lease ended: it may have landed late, others let through. Rejoin.
        void this.leaves.inBackground(key, entry.token, performance.now() + ttlMs, 'joined');
        return undefined;
      }
      place = renewed;
      attempt.placed(place);
    }
  }

  /** Our entry holds, until `leaseEnd`; `heard`: a document the news of it carried. */
  private hold(attempt: LineAttempt, leaseEnd: number, heard?: HeldDocument): LineHold {
    const { request, entry, followers } = attempt;
    this.deps.handover.held(followers);
    const { fence, holds, document } = attempt.place!;
    // A document read by a write that found us waiting is not the one we hold.
    const held = heard ?? (holds ? document : undefined);
    const read = held ? { document: held } : {};
    const { key, ttlMs } = request;
    return { key, token: entry.token, fence, leaseEnd, ttlMs, followers, ...read };
  }

  /**
   * Hands the entry to a caller here queued behind it, within `lease` (the keeper's; undefined
   * when only a write can tell it is ours), or leaves the line. False if our entry was gone.
   */
  async release(hold: LineHold, lease?: HandableLease): Promise<boolean> {
    // Kept only with `lease` known: retried while it may run (an extend() may have lengthened it).
    if (this.deps.handover.handOn(hold, lease, () => this.giveBack(hold, lease))) return true;
    const left = await this.leaves.leave(hold.key, hold.token);
    this.deps.handover.left(hold.key);
    this.leaves.ended(hold);
    return left;
  }

  /**
   * The held entry's new remaining lease, or undefined when it ended. Our token with another
   * fence is not ours: a late join of the call made it after `forceRelease` removed ours, and
   * others may have held in between. `exactly`: end in `ttlMs`, maybe sooner (`expireIn`).
   */
  async renew(
    hold: Pick<LineHold, 'key' | 'token' | 'fence'>,
    ttlMs: number,
    exactly = false,
  ): Promise<{ remainingMs: number } | undefined> {
    const renewed = await this.deps.store.renew(hold.key, hold.token, ttlMs, exactly);
    const ours = renewed.renewed && renewed.fence === entryFenceOf(hold.fence);
    return ours && renewed.holds ? { remainingMs: renewed.remainingMs } : undefined;
  }

  /**
   * Leaves a hold nobody will use, in the background, retried until its lease would have ended:
   * the hold's, the handle's `lease` as last renewed or extended (the keeper's shortest over its
   * keys), or one of either `ttlMs` from now (a renewal in flight may move it). Resolves once a
   * leave is answered (whether our entry was still there), or undefined if none was.
   */
  giveBack(hold: LineHold, lease?: HandableLease): Promise<boolean | undefined> {
    // Its lease may be known lost (a renewal before hand-out found it gone): never handed on.
    this.deps.handover.dissolved(hold.followers);
    const ttlMs = Math.max(hold.ttlMs, lease?.ttlMs ?? 0);
    const until = Math.max(hold.leaseEnd, lease?.end ?? 0, performance.now() + ttlMs);
    const leaving = this.leaves.inBackground(hold.key, hold.token, until, 'joined');
    void leaving.then(() => this.leaves.ended(hold));
    return leaving;
  }

  /** Joins the line, or queues behind an entry of ours to take it over: a place, or following. */
  private async join(
    attempt: LineAttempt,
    formRetried = false,
  ): Promise<LinePlace | { following: Promise<LineHold | EntryFollowers | undefined> }> {
    const { request, entry } = attempt;
    const join = () => {
      // Listening first: the event that makes us holder may come before the reply.
      void entry.listen();
      const before = entry.state;
      entry.state = 'unknown';
      // Counted from the first join of this token that may have landed: a retry's reply may be
      // that one's stored image, timed by the lease it set (`timeOf`).
      if (before === 'none') attempt.joinSentAt = performance.now();
      // Nothing written (refused, or failed so): the state before this try, as an earlier
      // unanswered one may have joined and land later.
      return this.deps.store.join(this.joinRequest(attempt)).then(
        (result) => {
          entry.state = result.joined ? 'joined' : before;
          return result;
        },
        (error: unknown) => {
          if (wroteNothing(error)) entry.state = before;
          throw error;
        },
      );
    };
    // An entry of ours kept for a caller here (`line-handover.ts`): a mutex's try takes it over
    // if it fits, a mutex's wait queues to it (below); any other caller joins after it left.
    const tries = request.timeoutMs === 0;
    if (takesOver(request)) this.deps.handover.asks(request.key);
    if (tries && takesOver(request)) {
      const kept = this.deps.handover.takeKept(request.key, request.ttlMs);
      if (kept) return { following: Promise.resolve(kept) };
    }
    if (!inCallOrder(request)) await this.clearOurWay(attempt, true);
    // A try is one attempt, now; a wait retries an unanswered join by its token. A mutex's waits
    // join in call order, once earlier callers' joins here were answered (one that gave up sent
    // nothing), or queue behind an entry of ours to take it over.
    const joined = inCallOrder(request)
      ? await this.joinsInCallOrder.run(request.key, async (ahead) => {
          if (ahead) await this.behindCallersHere(attempt, ahead);
          // One caller at a time per key gets here: the front of the call order.
          this.frontSince.set(request.key, performance.now());
          try {
            const following =
              takesOver(request) &&
              !attempt.opens &&
              this.deps.handover.follow({
                ...request,
                deadline: attempt.deadline,
                timedOut: () => attempt.timedOut(),
              });
            if (following) return { following };
            await this.clearOurWay(attempt, !takesOver(request));
            return await this.send(attempt, join);
          } finally {
            this.frontSince.delete(request.key);
          }
        })
      : await (tries
          ? attempt.tried(join, this.deps.lateReplyMs, () => this.deps.store.monitorFailure?.())
          : this.send(attempt, join));
    if ('following' in joined) return joined;
    if (joined.joined) return joined;
    // Refused for another form: that may be our own entry on its way out (a kept one left after
    // its turn, a give-back), so the join is sent once more when our leaves there are answered.
    if (joined.reason === 'kind' && !formRetried && this.leaves.hurry(request.key)) {
      await this.clearOurWay(attempt, false, true);
      return this.join(attempt, true);
    }
    throw joinRefused(request, joined);
  }

  /**
   * Waits for the callers here ahead until their joins were answered (or they gave up), until our
   * deadline and a reply's margin. Past our deadline a join of ours would come too late: we were
   * busy with them, unless MongoDB's silence kept them (the last one failed so, and is the cause,
   * or the front one's command has gone unanswered for that margin).
   */
  private async behindCallersHere(attempt: LineAttempt, ahead: Promise<unknown>): Promise<void> {
    const { request, deadline } = attempt;
    const graceMs = this.firstReplyGraceMs(attempt);
    const frontAskedMs = () => performance.now() - (this.frontSince.get(request.key) ?? Infinity);
    const silent = (failure?: unknown) =>
      isStoreUnavailableError(failure) || frontAskedMs() >= (this.deps.lateReplyMs ?? 0);
    const late = (failure?: unknown) =>
      silent(failure)
        ? attempt.unanswered(graceMs, isStoreUnavailableError(failure) ? failure : undefined)
        : attempt.timedOut();
    const failure = await settledBy(ahead, deadline + graceMs, request.signal, late);
    if (performance.now() >= deadline) throw late(failure);
  }

  private joinRequest({ request, entry }: LineAttempt): Omit<JoinRequest, 'idleRetentionMs'> {
    return {
      key: request.key,
      token: entry.token,
      holderId: this.deps.holderId,
      ttlMs: request.ttlMs,
      kind: request.kind,
      onlyIfHolds: request.timeoutMs === 0,
      ...(request.scope === undefined ? {} : { scope: request.scope }),
      ...(request.target === undefined ? {} : { target: request.target }),
    };
  }

  /**
   * A wait's command, retried while MongoDB is unavailable until the deadline. A reply on its way
   * then is waited for `lateReplyMs` more, as a try's is: a `timeoutMs` shorter than a round trip
   * does no worse than none. Past that, MongoDB's silence fails the call, in line or not.
   */
  private send<T>(attempt: LineAttempt, command: () => Promise<T>): Promise<T> {
    const { deadline, request } = attempt;
    const lateReplyMs = this.deps.lateReplyMs ?? 0;
    // Nothing more is sent past the deadline with a place in line (a rejoin), nor past a reply's
    // time (a kept entry's leave waited for as long); a first join held back by that leave is.
    if (attempt.place && performance.now() >= deadline) return Promise.reject(attempt.timedOut());
    if (performance.now() >= deadline + lateReplyMs) {
      return Promise.reject(attempt.unanswered(lateReplyMs));
    }
    const tolerated = attempt.retried(command);
    return settledBy(tolerated, deadline + lateReplyMs, request.signal, () =>
      attempt.unanswered(lateReplyMs),
    );
  }

  /** How long past the deadline callers here are waited for while no reply has placed us. */
  private firstReplyGraceMs(attempt: LineAttempt): number {
    return attempt.place ? 0 : (this.deps.lateReplyMs ?? 0);
  }

  /**
   * Makes our entries in our way leave, waiting as long as for a reply (`send`): `kept`, one kept
   * for a caller here; always, those on their way out (`LineLeaves.hurry`), which a wait does not
   * wait for unless `ours` (its join goes alongside: their leaves' replies tell our waiters who
   * holds).
   */
  private async clearOurWay(attempt: LineAttempt, kept: boolean, ours = false): Promise<void> {
    const { request, deadline } = attempt;
    const hurried = this.leaves.hurry(request.key);
    const leaving = [
      kept ? this.deps.handover.letGo(request.key) : undefined,
      request.timeoutMs === 0 || ours ? hurried : undefined,
    ].filter((left) => left !== undefined);
    if (leaving.length === 0) return;
    const until = deadline + this.firstReplyGraceMs(attempt);
    const woke = await wakeUp({ heard: Promise.all(leaving) }, until, request.signal);
    if (woke === 'aborted') throw request.signal?.reason;
  }

  /** Settles once the leaves under way in the background have (each within its lease). */
  leavesSettled(): Promise<void> {
    // An entry kept for a caller here leaves now.
    this.deps.handover.closeAll();
    return this.leaves.settled();
  }
}
