import type { History, SectionRecord, Violation } from './history';

/**
 * One live lease seen by the lease sampler (`FaultRun.sampleLeases`): an owned lock document
 * whose `expiresAt` was after the server's `$$NOW` when the read ran. Times are on the shared
 * clock; the server evaluated `$$NOW` somewhere between `sentAt` and `receivedAt`.
 */
export interface LeaseObservation {
  key: string;
  /** Fencing token of the lease, as a decimal string (as sections record it). */
  fence: string;
  holder: string | null;
  sentAt: number;
  receivedAt: number;
}

export interface OrphanCheckOptions {
  /**
   * How long a lease may stay live without a section that accounts for it: an attempt of
   * unknown outcome must be given back by then. {@link orphanBoundMs} gives the suite's bound.
   */
  boundMs: number;
  /** Longest lease in the scenario: a dead holder's lease may live this long after its death. */
  leaseMs: number;
  /** Slack after a dead holder's lease (as the checker's `expiryMarginMs`). Default 1000 ms. */
  expiryMarginMs?: number;
  /** Process of each holder id, to excuse leases of paused processes. */
  holderPids?: ReadonlyMap<string, number>;
  /** Acquisition calls that failed: a lease won by one of them counts from the call's end. */
  failedCalls?: readonly FailedAcquireCall[];
  /** What else is known of an orphaned lease (its key's history), added to its violation. */
  explain?: (key: string, fence: string) => string;
}

/**
 * An `acquire` call that failed (timed out, or MongoDB unavailable). An attempt of it whose
 * reply was lost may have won: the library gives that back only once the call sends no more
 * attempts (a later attempt with the same token could still recognise the win), so such a
 * lease may stay live, unused, until the call settles, and is accountable from then on.
 */
export interface FailedAcquireCall {
  holder: string;
  key: string;
  calledAt: number;
  settledAt: number;
}

/** A lease may have appeared this long before the sampler first saw it (a read's gap, and load). */
const APPEARED_BEFORE_SEEN_MS = 500;

/**
 * The bound for an orphaned lease: an attempt of unknown outcome is given back after the
 * attempts still on their way have settled (at most one command) plus one release command.
 */
export function orphanBoundMs(operationTimeoutMs: number): number {
  return operationTimeoutMs * 2 + 500;
}

/** One acquisition as the sampler saw it: every observation of one (key, fence). */
interface SeenLease {
  key: string;
  fence: string;
  holder: string | null;
  /** Latest moment it surely was live first: the first observation's reply. */
  firstSeen: number;
  /** Earliest moment it surely was still live last: the last observation's request. */
  lastSeen: number;
  observations: number;
}

/** What the sampler saw, for a scenario's notes. */
export interface LeaseSamplingSummary {
  /** Distinct leases (key, fence) observed live. */
  leases: number;
  /** Of those, leases that no reported section accounts for. */
  unmatched: number;
  /** How long the longest unmatched lease was seen live, in ms (0 if none). */
  longestUnmatchedMs: number;
}

/**
 * Flags orphaned leases: a lease observed live, for longer than `boundMs`, whose (key, fence)
 * matches no section any worker reported (`orphaned-lease`). Such a lease was granted to an
 * attempt whose caller never got it (a reply lost, a call that gave up) and was not given back.
 * If it appeared while an acquire call of its holder on its key was running and that call
 * failed, it counts from the call's end (see {@link FailedAcquireCall}).
 * A lease that does match a section is flagged too when it stays live longer than `boundMs`
 * plus one lease (a renewal sent before the holder let go may land late and extend it once)
 * past the end of that section's work and its local deadline: its holder let go of it, and
 * neither the release nor the lease's end freed it.
 *
 * A lease of an instance the scenario killed is excused until its lease (plus margin) has run
 * out after the death, as the checker's `held-by-dead`; a lease of a process paused by the
 * scenario is excused while paused and for `boundMs` after it was resumed.
 */
export function findOrphanedLeases(
  history: History,
  observations: readonly LeaseObservation[],
  options: OrphanCheckOptions,
): Violation[] {
  const sections = sectionsByLease(history.sections);
  const violations: Violation[] = [];
  for (const lease of groupObservations(observations)) {
    const section = sections.get(leaseId(lease.key, lease.fence));
    // From when the lease's holder had to have let go of it.
    const accountableFrom = section
      ? heldUntil(section, history)
      : Math.max(lease.firstSeen, endOfFailedCall(lease, options.failedCalls ?? []));
    // A renewal sent before the holder let go may land later and extend the lease once more.
    const boundMs = section ? options.boundMs + options.leaseMs : options.boundMs;
    const overMs = lease.lastSeen - accountableFrom;
    if (overMs <= boundMs) continue;
    if (excused(lease, accountableFrom, history, options)) continue;
    violations.push({
      kind: 'orphaned-lease',
      key: lease.key,
      detail: section
        ? `lease of ${describe(section)} was still live ${formatMs(overMs)} after its holder ` +
          `let go of it (end of work or local deadline, whichever later), seen ` +
          `${lease.observations} times; bound ${boundMs} ms (orphan bound + one lease)`
        : `lease with fence ${lease.fence} held by ${lease.holder ?? 'nobody'} was live for ` +
          `${formatMs(overMs)}${accountableFrom > lease.firstSeen ? ' after its failed acquire call settled' : ''} ` +
          `(seen ${lease.observations} times) and no worker reported a section with that ` +
          `fence; bound ${boundMs} ms`,
    });
    if (options.explain) {
      // On the shared clock, as the explanation's times are.
      const settled =
        accountableFrom > lease.firstSeen
          ? `, its failed call settled @${accountableFrom.toFixed(1)}`
          : '';
      violations[violations.length - 1].detail +=
        `\n  seen live @${lease.firstSeen.toFixed(1)} to @${lease.lastSeen.toFixed(1)}${settled}` +
        `\n${options.explain(lease.key, lease.fence)}`;
    }
  }
  return violations;
}

/** Counts what the sampler saw, orphaned or not. */
export function summarizeLeaseSampling(
  history: History,
  observations: readonly LeaseObservation[],
): LeaseSamplingSummary {
  const sections = sectionsByLease(history.sections);
  const leases = groupObservations(observations);
  const unmatched = leases.filter((l) => !sections.has(leaseId(l.key, l.fence)));
  return {
    leases: leases.length,
    unmatched: unmatched.length,
    longestUnmatchedMs: Math.max(0, ...unmatched.map((l) => l.lastSeen - l.firstSeen)),
  };
}

/** The end of the latest failed call of the lease's holder on its key that was running when it appeared. */
function endOfFailedCall(lease: SeenLease, calls: readonly FailedAcquireCall[]): number {
  let end = Number.NEGATIVE_INFINITY;
  for (const call of calls) {
    if (call.holder !== lease.holder || call.key !== lease.key) continue;
    const runningWhenItAppeared =
      call.calledAt <= lease.firstSeen &&
      call.settledAt >= lease.firstSeen - APPEARED_BEFORE_SEEN_MS;
    if (runningWhenItAppeared) end = Math.max(end, call.settledAt);
  }
  return end;
}

function leaseId(key: string, fence: string): string {
  return `${key}\0${fence}`;
}

function sectionsByLease(sections: SectionRecord[]): Map<string, SectionRecord> {
  return new Map(sections.map((s) => [leaseId(s.key, s.fence), s]));
}

/**
 * A fence is given once per key and a lease, once ended, never comes back to life: so a
 * (key, fence) seen live twice was live all the time in between.
 */
function groupObservations(observations: readonly LeaseObservation[]): SeenLease[] {
  const leases = new Map<string, SeenLease>();
  for (const o of observations) {
    const id = leaseId(o.key, o.fence);
    const seen = leases.get(id);
    if (!seen) {
      leases.set(id, {
        key: o.key,
        fence: o.fence,
        holder: o.holder,
        firstSeen: o.receivedAt,
        lastSeen: o.sentAt,
        observations: 1,
      });
      continue;
    }
    seen.firstSeen = Math.min(seen.firstSeen, o.receivedAt);
    seen.lastSeen = Math.max(seen.lastSeen, o.sentAt);
    seen.observations += 1;
  }
  return [...leases.values()];
}

/**
 * Until when a section's holder kept its lease on purpose: the end of its work, or its local
 * deadline if later (an unconfirmed release leaves the lease to run out by then). A section
 * whose work never ended counts until its holder died, or for ever (a leak: the checker's
 * `unreleased`).
 */
function heldUntil(section: SectionRecord, history: History): number {
  if (section.end === null) {
    const death = history.deaths.find((d) => d.holder === section.holder);
    return death?.diedAt ?? Number.POSITIVE_INFINITY;
  }
  return Math.max(section.end, section.deadline ?? section.end);
}

function excused(
  lease: SeenLease,
  accountableFrom: number,
  history: History,
  options: OrphanCheckOptions,
): boolean {
  if (lease.holder === null) return false;
  const death = history.deaths.find((d) => d.holder === lease.holder);
  const margin = options.expiryMarginMs ?? 1000;
  if (death && lease.lastSeen <= death.diedAt + options.leaseMs + margin) return true;
  const pid =
    options.holderPids?.get(lease.holder) ??
    history.sections.find((s) => s.holder === lease.holder)?.pid;
  if (pid === undefined) return false;
  // Paused while it had to let go, and not given `boundMs` since it was resumed.
  return history.pauses.some(
    (p) =>
      p.pid === pid &&
      p.from <= lease.lastSeen &&
      (p.to === null || (p.to >= accountableFrom && lease.lastSeen - p.to <= options.boundMs)),
  );
}

function describe(section: SectionRecord): string {
  return `${section.worker} (fence ${section.fence}, ${section.outcome})`;
}

function formatMs(ms: number): string {
  return Number.isFinite(ms) ? `${ms.toFixed(2)} ms` : 'unbounded';
}
