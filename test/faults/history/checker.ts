import { FENCES_PER_ENTRY } from '../../../lib/store/line/line-document';
import type {
  DeadInstance,
  FinalLockState,
  History,
  PauseRecord,
  SectionRecord,
  Violation,
} from './history';

/** Default of {@link CheckerOptions.signalLatenessToleranceMs}. */
export const DEFAULT_SIGNAL_LATENESS_TOLERANCE_MS = 50;

export interface CheckerOptions {
  /** Longest lease any holder in the history asked for, in ms. */
  leaseMs: number;
  /**
   * Slack for comparing times taken in different processes (the shared clock is derived per
   * process); times from one process are compared exactly. Applies to protected intervals.
   * Default 1 ms.
   */
  crossProcessToleranceMs?: number;
  /**
   * How long a holder may go on working, untold, after its successor was granted: a holder's
   * signal is a timer in its own process, and a busy event loop runs timers late. Default
   * {@link DEFAULT_SIGNAL_LATENESS_TOLERANCE_MS} (50 ms), the lateness a loaded 2-core machine
   * shows; a process paused by the scenario is excused by its recorded pause instead.
   */
  signalLatenessToleranceMs?: number;
  /** Slack after a dead holder's lease before its lock counts as stuck. */
  expiryMarginMs?: number;
}

/**
 * Verifies a history against the lock's promises:
 * - for one key, no two protected intervals overlap. A holder's protected interval runs from
 *   its grant to the earlier of the end of its work (release, or death) and its own local
 *   lease deadline, the moment its signal must abort. Every section counts, lost or not: a
 *   lost holder was still promised the lock until its deadline;
 * - a holder that worked on past its successor's grant had been told by then (its signal
 *   aborted), unless the scenario paused its process over its deadline ('told-late');
 * - fences of one key strictly increase in grant order;
 * - every acquisition is released or reported lost (unless its process was killed);
 * - no lock stays held by a dead instance past its lease, nor by a live one after all work ended.
 */
export function checkHistory(history: History, options: CheckerOptions): Violation[] {
  const deaths = new Map(history.deaths.map((d) => [d.holder, d]));
  const byKey = groupByKey(history.sections);
  const violations: Violation[] = [];
  for (const [key, sections] of byKey) {
    const inGrantOrder = [...sections].sort((a, b) => grantTime(a) - grantTime(b));
    violations.push(...findOverlaps(key, inGrantOrder, deaths, options));
    violations.push(...findLateNotices(key, inGrantOrder, deaths, history.pauses, options));
    violations.push(...findFenceDisorder(key, inGrantOrder));
  }
  violations.push(...findUnreleased(history.sections, deaths));
  violations.push(...findStuckLocks(history, deaths, options));
  return violations;
}

export function groupByKey(sections: SectionRecord[]): Map<string, SectionRecord[]> {
  const byKey = new Map<string, SectionRecord[]>();
  for (const section of sections) {
    const list = byKey.get(section.key) ?? [];
    list.push(section);
    byKey.set(section.key, list);
  }
  return byKey;
}

/** When work stopped: a killed holder worked until it died; an open section of a live one never ended. */
export function workEnd(section: SectionRecord, deaths: Map<string, DeadInstance>): number {
  if (section.end !== null) return section.end;
  return deaths.get(section.holder)?.diedAt ?? Number.POSITIVE_INFINITY;
}

/**
 * End of the protected interval: the holder's work, cut at its own local deadline. Without a
 * deadline (an open record its worker never completed) the whole of its work counts.
 */
/**
 * When the section's lock was granted, at the latest. `start` is taken when the worker resumes
 * after `acquire` resolved, which a freeze of its process can put after the lease's deadline:
 * the grant then came before the deadline, and the section protected nothing after it.
 */
export function grantTime(section: Pick<SectionRecord, 'start' | 'deadline'>): number {
  return Math.min(section.start, section.deadline ?? Number.POSITIVE_INFINITY);
}

export function protectedEnd(section: SectionRecord, deaths: Map<string, DeadInstance>): number {
  return Math.min(workEnd(section, deaths), section.deadline ?? Number.POSITIVE_INFINITY);
}

/** Until when the holder worked without having been told of a loss. */
export function untoldUntil(section: SectionRecord, deaths: Map<string, DeadInstance>): number {
  return Math.min(workEnd(section, deaths), section.signalAt ?? Number.POSITIVE_INFINITY);
}

export function crossProcessSlack(
  a: SectionRecord,
  b: SectionRecord,
  options: CheckerOptions,
): number {
  return a.pid === b.pid ? 0 : (options.crossProcessToleranceMs ?? 1);
}

function findOverlaps(
  key: string,
  inGrantOrder: SectionRecord[],
  deaths: Map<string, DeadInstance>,
  options: CheckerOptions,
): Violation[] {
  const violations: Violation[] = [];
  // The interval reaching furthest so far: any later grant before its end is an overlap.
  let furthest: SectionRecord | undefined;
  for (const section of inGrantOrder) {
    if (furthest) {
      const overlapMs = protectedEnd(furthest, deaths) - grantTime(section);
      if (overlapMs > crossProcessSlack(furthest, section, options)) {
        violations.push({
          kind: 'overlap',
          key,
          detail:
            `${describe(section)} was granted ${formatMs(overlapMs)} before the protected ` +
            `interval of ${describe(furthest)} ended (${endedBy(furthest, deaths)})`,
        });
      }
    }
    if (!furthest || protectedEnd(section, deaths) > protectedEnd(furthest, deaths)) {
      furthest = section;
    }
  }
  return violations;
}

/**
 * A holder may work on after its protected interval only once told (its signal aborted).
 * Checked against the next grant of the key; a next grant inside the protected interval is
 * an overlap already, and is not reported twice.
 */
function findLateNotices(
  key: string,
  inGrantOrder: SectionRecord[],
  deaths: Map<string, DeadInstance>,
  pauses: PauseRecord[],
  options: CheckerOptions,
): Violation[] {
  const tolerance = options.signalLatenessToleranceMs ?? DEFAULT_SIGNAL_LATENESS_TOLERANCE_MS;
  const violations: Violation[] = [];
  for (let i = 0; i + 1 < inGrantOrder.length; i++) {
    const holder = inGrantOrder[i];
    const successor = inGrantOrder[i + 1];
    const overlapMs = protectedEnd(holder, deaths) - grantTime(successor);
    if (overlapMs > crossProcessSlack(holder, successor, options)) continue;
    const untold = untoldUntil(holder, deaths);
    const lateMs = untold - grantTime(successor);
    if (lateMs <= tolerance) continue;
    if (pausedOverDeadline(holder, untold, pauses, tolerance)) continue;
    const told =
      holder.signalAt === null
        ? 'its signal never aborted'
        : `its signal aborted ${formatMs(holder.signalAt - successor.start)} after that grant`;
    violations.push({
      kind: 'told-late',
      key,
      detail:
        `${describe(holder)} worked on ${formatMs(lateMs)} past the grant to ` +
        `${describe(successor)} before it was told: ${told}, ` +
        `its deadline was ${relative(holder.deadline, successor.start)}`,
    });
  }
  return violations;
}

/**
 * The one excuse for a late notice: the scenario froze the holder's process over its deadline,
 * and the holder was told as soon as it ran again (within the timer tolerance).
 */
export function pausedOverDeadline(
  section: SectionRecord,
  untold: number,
  pauses: PauseRecord[],
  tolerance: number,
): boolean {
  const deadline = section.deadline;
  if (deadline === null) return false;
  return pauses.some(
    (p) =>
      p.pid === section.pid &&
      p.from <= deadline &&
      (p.to === null || (p.to >= deadline && untold <= p.to + tolerance)),
  );
}

function endedBy(section: SectionRecord, deaths: Map<string, DeadInstance>): string {
  const work = workEnd(section, deaths);
  if (section.deadline !== null && section.deadline < work) return 'at its deadline';
  const unknown = section.deadline === null ? '; deadline unknown, so all its work counts' : '';
  if (section.end === null) {
    return `${deaths.has(section.holder) ? 'at its death' : 'never'}${unknown}`;
  }
  return `at its end of work${unknown}`;
}

function findFenceDisorder(key: string, inGrantOrder: SectionRecord[]): Violation[] {
  const violations: Violation[] = [];
  for (let i = 1; i < inGrantOrder.length; i++) {
    const before = inGrantOrder[i - 1];
    const after = inGrantOrder[i];
    if (BigInt(after.fence) <= BigInt(before.fence)) {
      violations.push({
        kind: 'fence-order',
        key,
        detail: `${describe(after)} was granted after ${describe(before)} with a fence not above it`,
      });
    }
  }
  return violations;
}

export function findUnreleased(
  sections: SectionRecord[],
  deaths: Map<string, DeadInstance>,
): Violation[] {
  return sections
    .filter((s) => s.outcome === 'open' && !deaths.has(s.holder))
    .map((s) => ({
      kind: 'unreleased' as const,
      key: s.key,
      detail: `${describe(s)} was neither released nor reported lost`,
    }));
}

export function findStuckLocks(
  history: History,
  deaths: Map<string, DeadInstance>,
  options: CheckerOptions,
): Violation[] {
  const margin = options.expiryMarginMs ?? 1000;
  const violations: Violation[] = [];
  for (const lock of history.finalLocks.filter((l) => l.held)) {
    const dead = lock.holder === null ? undefined : deaths.get(lock.holder);
    if (!dead) {
      violations.push({
        kind: 'leaked-lock',
        key: lock.key,
        detail:
          `still held by live instance ${lock.holder} after all work ended` +
          describeLeakedLease(lock, history.sections),
      });
    } else if (lock.observedAt > dead.diedAt + options.leaseMs + margin) {
      violations.push({
        kind: 'held-by-dead',
        key: lock.key,
        detail:
          `held by ${lock.holder}, dead for ${formatMs(lock.observedAt - dead.diedAt)}, ` +
          `past its lease of ${options.leaseMs} ms`,
      });
    }
  }
  return violations;
}

/**
 * The leaked lease, and the sections recorded with a fence of its entry's block (none: no call
 * was handed it; callers handed it within the process hold the block's later fences).
 */
function describeLeakedLease(lock: FinalLockState, sections: SectionRecord[]): string {
  if (!lock.lease) return '';
  const { fence, remainingMs } = lock.lease;
  const first = BigInt(fence);
  const inBlock = (other: string) => {
    const value = BigInt(other);
    return value >= first && value < first + FENCES_PER_ENTRY;
  };
  const same = sections.filter((s) => s.key === lock.key && inBlock(s.fence));
  const recorded = same.length === 0 ? 'no section has it' : same.map(describe).join(', ');
  return ` (fence ${fence}, ${formatMs(remainingMs)} left; ${recorded})`;
}

export function describe(section: SectionRecord): string {
  return `${section.worker} (fence ${section.fence}, ${section.outcome})`;
}

export function formatMs(ms: number): string {
  return Number.isFinite(ms) ? `${ms.toFixed(2)} ms` : 'unbounded';
}

export function relative(time: number | null, reference: number): string {
  if (time === null) return 'unknown';
  const delta = time - reference;
  return delta <= 0 ? `${formatMs(-delta)} before it` : `${formatMs(delta)} after it`;
}
