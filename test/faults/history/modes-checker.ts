import {
  crossProcessSlack,
  DEFAULT_SIGNAL_LATENESS_TOLERANCE_MS,
  describe as describeHolder,
  findStuckLocks,
  findUnreleased,
  formatMs,
  grantTime,
  groupByKey,
  pausedOverDeadline,
  protectedEnd,
  relative,
  untoldUntil,
  type CheckerOptions,
} from './checker';
import type { DeadInstance, History, PauseRecord, SectionRecord, Violation } from './history';

/**
 * How a section held its key (`LockService.acquire`'s `mode`, `permits`, `weight`, `scope`),
 * recorded with it. A section without these fields is an exclusive lock.
 */
export interface ModeFields {
  /** `'exclusive'` when absent. A semaphore's permit holders are `'shared'`. */
  mode?: 'exclusive' | 'shared';
  /** The key is a semaphore of this many permits. */
  permits?: number;
  /** Permits this holder took (default 1). */
  weight?: number;
  /** The owner scope of the acquisition (`releaseScope`). */
  scope?: string;
  /** When `acquire` was called, on the shared clock: the grant came after it. */
  requestedAt?: number;
}

export type ModeSection = SectionRecord & ModeFields;

/** A `releaseScope(scope)` call, on the shared clock. */
export interface Revocation {
  scope: string;
  calledAt: number;
  settledAt: number;
}

export interface ModesCheckerOptions extends CheckerOptions {
  /** `releaseScope` calls the scenario made: the documented end of their holders' leases. */
  revocations?: Revocation[];
  /**
   * How long after a `releaseScope` call settled a holder in another process may go on
   * working untold: it learns at its next renewal (renewal interval plus a round trip).
   * Default 1000 ms.
   */
  revocationNoticeMs?: number;
}

/** Default of {@link ModesCheckerOptions.revocationNoticeMs}. */
export const DEFAULT_REVOCATION_NOTICE_MS = 1000;

/** One form per key: a lock (exclusive and shared holders), or a semaphore of `permits`. */
type KeyForm = { kind: 'lock' } | { kind: 'semaphore'; permits: number };

/** A section as the checker judges it. */
interface Held {
  section: ModeSection;
  /**
   * When it was granted, at the latest: `grantTime`, its start unless a freeze put the
   * worker's record of it after its deadline (as in `checker.ts`).
   */
  granted: number;
  exclusive: boolean;
  weight: number;
  fence: bigint;
  /** End of the protected interval (cut at a revocation that ended it). */
  end: number;
  /** Until when the holder worked untold. */
  untold: number;
  /** The `releaseScope` call that revoked it, if one did while it held. */
  revokedBy: Revocation | undefined;
}

/**
 * The history checker of `checker.ts` for keys held in every mode. Same protected interval: a
 * holder's grant to the earlier of the end of its work (release, or death) and its own local
 * deadline; a holder revoked by `releaseScope` (its scope, granted before the call) is
 * protected only until the call. Then, for each key:
 * - a lock: an exclusive interval overlaps no other interval of the key; shared intervals may
 *   overlap each other (`overlap`);
 * - a semaphore of N permits: at every instant the weights of the overlapping intervals add up
 *   to at most N (`over-capacity`);
 * - a holder that works on past its protected interval is told before a grant that could
 *   only be made without it: any grant after an exclusive holder, an exclusive grant after a
 *   shared one, a grant of permits that needed this holder's (`told-late`; a pause the
 *   scenario caused excuses it, as in `checker.ts`). A revoked holder in another process is
 *   told by its next renewal: `revocationNoticeMs` after the call settled;
 * - no two grants of a key share a fence, and a grant certainly made after another has the
 *   higher fence: one whose `acquire` was called after the other's grant was seen, or, on a
 *   lock, an exclusive grant or one after an exclusive holder, in grant order (`fence-order`);
 * - every acquisition released or reported lost unless its process was killed, and no lease
 *   (exclusive or holder entry) left held by a dead instance past its lease, nor by a live
 *   one once all work ended (`checker.ts`'s rules; `finalLocks` lists each live lease).
 */
export function checkModesHistory(history: History, options: ModesCheckerOptions): Violation[] {
  const deaths = new Map(history.deaths.map((d) => [d.holder, d]));
  const violations: Violation[] = [];
  for (const [key, sections] of groupByKey(history.sections)) {
    const inGrantOrder = [...(sections as ModeSection[])].sort(
      (a, b) => grantTime(a) - grantTime(b),
    );
    const form = keyForm(key, inGrantOrder, violations);
    const held = inGrantOrder.map((s) => judged(s, deaths, options.revocations ?? []));
    const active = activeAtGrants(held, options);
    violations.push(...findConflicts(key, form, held, active, deaths));
    violations.push(...findLateNotices(key, form, held, active, history.pauses, options));
    violations.push(...findRevokedTooLate(key, held, history.pauses, options));
    violations.push(...findFenceDisorder(key, form, held));
  }
  violations.push(...findUnreleased(history.sections, deaths));
  violations.push(...findStuckLocks(history, deaths, options));
  return violations;
}

function keyForm(key: string, sections: ModeSection[], violations: Violation[]): KeyForm {
  const permits = new Set(sections.map((s) => s.permits ?? null));
  if (permits.size === 1 && permits.has(null)) return { kind: 'lock' };
  if (permits.size > 1) {
    const forms = [...permits].map((p) => (p === null ? 'a lock' : `${p} permits`)).join(', ');
    violations.push({
      kind: 'scenario',
      key,
      detail: `the key was held in more than one form (${forms}); judged as the smallest semaphore`,
    });
  }
  const counts = [...permits].filter((p): p is number => p !== null);
  return { kind: 'semaphore', permits: Math.min(...counts) };
}

function judged(
  section: ModeSection,
  deaths: Map<string, DeadInstance>,
  revocations: Revocation[],
): Held {
  const ownEnd = protectedEnd(section, deaths);
  // Revoked: its scope, granted before the call, still protected when the call was made.
  const revokedBy = revocations
    .filter(
      (r) =>
        section.scope !== undefined &&
        r.scope === section.scope &&
        grantTime(section) < r.calledAt &&
        ownEnd > r.calledAt,
    )
    .sort((a, b) => a.calledAt - b.calledAt)[0];
  return {
    section,
    granted: grantTime(section),
    exclusive: (section.mode ?? 'exclusive') === 'exclusive' && section.permits === undefined,
    weight: section.weight ?? 1,
    fence: BigInt(section.fence),
    end: revokedBy ? revokedBy.calledAt : ownEnd,
    untold: untoldUntil(section, deaths),
    revokedBy,
  };
}

/**
 * Whether `a`'s protected interval still runs at `b`'s grant (times across processes get the
 * tolerance).
 */
function protects(a: Held, b: Held, options: CheckerOptions): boolean {
  return a.end - b.granted > crossProcessSlack(a.section, b.section, options);
}

/**
 * For each grant (by index), the earlier-or-equal grants whose protected interval still runs then.
 */
function activeAtGrants(held: Held[], options: CheckerOptions): Held[][] {
  const slack = options.crossProcessToleranceMs ?? 1;
  const result: Held[][] = [];
  let running: Held[] = [];
  for (const [j, b] of held.entries()) {
    // Intervals that ended (by more than any tolerance) before this grant end before all later
    // ones.
    running = running.filter((a) => a.end - b.granted > -slack);
    result.push(running.filter((a) => protects(a, b, options)));
    running.push(held[j]);
  }
  return result;
}

function used(holders: Held[], except?: Held): number {
  return holders.filter((h) => h !== except).reduce((sum, h) => sum + h.weight, 0);
}

/** On a lock: one of the two is exclusive. On a semaphore: the two do not fit beside `others`. */
function conflicting(form: KeyForm, a: Held, b: Held, others: Held[]): boolean {
  if (form.kind === 'lock') return a.exclusive || b.exclusive;
  return used(others, a) + a.weight + b.weight > form.permits;
}

function findConflicts(
  key: string,
  form: KeyForm,
  held: Held[],
  active: Held[][],
  deaths: Map<string, DeadInstance>,
): Violation[] {
  const violations: Violation[] = [];
  for (const [j, b] of held.entries()) {
    const running = active[j];
    if (form.kind === 'semaphore') {
      const total = used(running) + b.weight;
      if (total > form.permits) {
        violations.push({
          kind: 'over-capacity',
          key,
          detail:
            `${describeHeld(b)} was granted while ${used(running)} of ${form.permits} permits ` +
            `were held: ${total} at once, by ${running.map((a) => describeHeld(a)).join(', ')}` +
            ` (their protected intervals ended ${running.map((a) => endedBy(a, b, deaths)).join(', ')})`,
        });
      }
      continue;
    }
    const clashes = running.filter((a) => a.exclusive || b.exclusive);
    if (clashes.length === 0) continue;
    const worst = clashes.reduce((x, y) => (y.end > x.end ? y : x));
    const others = clashes.length > 1 ? ` (and ${clashes.length - 1} more)` : '';
    violations.push({
      kind: 'overlap',
      key,
      detail:
        `${describeHeld(b)} was granted ${formatMs(worst.end - b.granted)} before the ` +
        `protected interval of ${describeHeld(worst)}${others} ended (${endedBy(worst, b, deaths)})`,
    });
  }
  return violations;
}

/**
 * A holder may work on past its protected interval only once told. For each holder: the first
 * later grant that conflicts with it (see {@link conflicting}). A conflicting grant inside the
 * protected interval is an overlap (or over capacity) already, and not reported twice; one
 * after it must find the holder told, within the timer tolerance, unless the scenario froze
 * the holder over its deadline. Revoked holders are judged by {@link findRevokedTooLate}.
 */
function findLateNotices(
  key: string,
  form: KeyForm,
  held: Held[],
  active: Held[][],
  pauses: PauseRecord[],
  options: ModesCheckerOptions,
): Violation[] {
  const tolerance = options.signalLatenessToleranceMs ?? DEFAULT_SIGNAL_LATENESS_TOLERANCE_MS;
  const violations: Violation[] = [];
  for (const [i, h] of held.entries()) {
    if (h.revokedBy || h.untold <= h.end) continue;
    for (let j = i + 1; j < held.length; j++) {
      const g = held[j];
      if (g.granted > h.untold) break; // told (or stopped) before any later grant
      const inside = protects(h, g, options);
      const others = active[j].filter((a) => a !== h);
      if (!conflicting(form, h, g, others)) continue;
      if (inside) break; // an overlap, reported as such
      const lateMs = h.untold - g.granted;
      if (lateMs > tolerance && !pausedOverDeadline(h.section, h.untold, pauses, tolerance)) {
        const told =
          h.section.signalAt === null
            ? 'its signal never aborted'
            : `its signal aborted ${formatMs(h.section.signalAt - g.granted)} after that grant`;
        violations.push({
          kind: 'told-late',
          key,
          detail:
            `${describeHeld(h)} worked on ${formatMs(lateMs)} past the grant to ` +
            `${describeHeld(g)}, which it conflicts with, before it was told: ${told}, ` +
            `its deadline was ${relative(h.section.deadline, g.granted)}`,
        });
      }
      break;
    }
  }
  return violations;
}

/**
 * A holder revoked by `releaseScope` in another process learns it at its next renewal: it
 * must be told (or have stopped) `revocationNoticeMs` after the call settled, or after the
 * end of a pause the scenario put it in meanwhile.
 */
function findRevokedTooLate(
  key: string,
  held: Held[],
  pauses: PauseRecord[],
  options: ModesCheckerOptions,
): Violation[] {
  const noticeMs = options.revocationNoticeMs ?? DEFAULT_REVOCATION_NOTICE_MS;
  const violations: Violation[] = [];
  for (const h of held) {
    const revocation = h.revokedBy;
    if (!revocation) continue;
    let bound = revocation.settledAt + noticeMs;
    for (const p of pauses) {
      if (
        p.pid === h.section.pid &&
        p.from <= bound &&
        (p.to === null || p.to >= revocation.calledAt)
      ) {
        bound = Math.max(bound, (p.to ?? Number.POSITIVE_INFINITY) + noticeMs);
      }
    }
    if (h.untold <= bound) continue;
    const told =
      h.section.signalAt === null
        ? 'its signal never aborted'
        : `its signal aborted ${formatMs(h.section.signalAt - revocation.settledAt)} after the call settled`;
    violations.push({
      kind: 'told-late',
      key,
      detail:
        `${describeHeld(h)} of scope ${JSON.stringify(revocation.scope)} worked on untold ` +
        `${formatMs(h.untold - revocation.settledAt)} after releaseScope settled (allowed ` +
        `${noticeMs} ms, its next renewal): ${told}`,
    });
  }
  return violations;
}

/**
 * Fences are unique per key and follow the order of grants where that order is certain: a
 * grant seen (its `grantTime`) before another's `acquire` was called came first; on a lock,
 * two grants of which one is exclusive did not overlap, so their grant order is the order of
 * their grant times. Not of their starts: a process frozen between the hand-out and the
 * worker's record starts after its deadline, maybe after a later grant with a higher fence
 * (FINDINGS L18).
 */
function findFenceDisorder(key: string, form: KeyForm, held: Held[]): Violation[] {
  const violations: Violation[] = [];
  const byFence = new Map<bigint, Held>();
  for (const h of held) {
    const twin = byFence.get(h.fence);
    if (twin) {
      violations.push({
        kind: 'fence-order',
        key,
        detail: `${describeHeld(h)} and ${describeHeld(twin)} were granted the same fence`,
      });
    }
    byFence.set(h.fence, h);
  }
  for (const [j, b] of held.entries()) {
    const requestedAt = b.section.requestedAt ?? Number.NEGATIVE_INFINITY;
    let before: Held | undefined;
    for (let i = 0; i < held.length; i++) {
      const a = held[i];
      if (a === b) continue;
      const certainlyBefore =
        a.granted < requestedAt ||
        (form.kind === 'lock' && i < j && (a.exclusive || b.exclusive) && a.granted < b.granted);
      if (certainlyBefore && a.fence >= b.fence && (!before || a.fence > before.fence)) before = a;
    }
    if (before) {
      violations.push({
        kind: 'fence-order',
        key,
        detail: `${describeHeld(b)} was granted after ${describeHeld(before)} with a fence not above it`,
      });
    }
  }
  return violations;
}

function describeHeld(h: Held): string {
  const s = h.section;
  const form =
    s.permits !== undefined
      ? `${h.weight} of ${s.permits} permits`
      : h.exclusive
        ? 'exclusive'
        : 'shared';
  return `${describeHolder(s)} [${form}]`;
}

/** How `a`'s protected interval ends, relative to `b`'s grant. */
function endedBy(a: Held, b: Held, deaths: Map<string, DeadInstance>): string {
  if (a.revokedBy) return `revoked at ${relative(a.revokedBy.calledAt, b.granted)}`;
  const s = a.section;
  const work = s.end ?? deaths.get(s.holder)?.diedAt ?? null;
  if (s.deadline !== null && (work === null || s.deadline < work)) {
    return `deadline ${relative(s.deadline, b.granted)}`;
  }
  if (work === null) return 'never: open, its process alive';
  return `${s.end === null ? 'death' : 'end of work'} ${relative(work, b.granted)}${
    s.deadline === null ? ', deadline unknown' : ''
  }`;
}
