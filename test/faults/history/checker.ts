import type { DeadInstance, History, SectionRecord, Violation } from './history';

export interface CheckerOptions {
  /** Longest lease any holder in the history asked for, in ms. */
  leaseMs: number;
  /**
   * Slack for comparing times taken in different processes (the shared clock is derived per
   * process); times from one process are compared exactly.
   */
  crossProcessToleranceMs?: number;
  /** Slack after a dead holder's lease before its lock counts as stuck. */
  expiryMarginMs?: number;
}

/**
 * Verifies a history against the lock's promises:
 * - no two holders of one key that were not told of a loss overlap in time;
 * - fences of one key strictly increase in grant order;
 * - every acquisition is released or reported lost (unless its process was killed);
 * - no lock stays held by a dead instance past its lease, nor by a live one after all work ended.
 */
export function checkHistory(history: History, options: CheckerOptions): Violation[] {
  const deaths = new Map(history.deaths.map((d) => [d.holder, d]));
  const byKey = groupByKey(history.sections);
  const violations: Violation[] = [];
  for (const [key, sections] of byKey) {
    const inGrantOrder = [...sections].sort((a, b) => a.start - b.start);
    violations.push(...findOverlaps(key, inGrantOrder, deaths, options));
    violations.push(...findFenceDisorder(key, inGrantOrder));
  }
  violations.push(...findUnreleased(history.sections, deaths));
  violations.push(...findStuckLocks(history, deaths, options));
  return violations;
}

function groupByKey(sections: SectionRecord[]): Map<string, SectionRecord[]> {
  const byKey = new Map<string, SectionRecord[]>();
  for (const section of sections) {
    const list = byKey.get(section.key) ?? [];
    list.push(section);
    byKey.set(section.key, list);
  }
  return byKey;
}

/** A killed holder worked until it died; an open section of a live one never ended. */
function effectiveEnd(section: SectionRecord, deaths: Map<string, DeadInstance>): number {
  if (section.end !== null) return section.end;
  return deaths.get(section.holder)?.diedAt ?? Number.POSITIVE_INFINITY;
}

function findOverlaps(
  key: string,
  inGrantOrder: SectionRecord[],
  deaths: Map<string, DeadInstance>,
  options: CheckerOptions,
): Violation[] {
  const tolerance = options.crossProcessToleranceMs ?? 1;
  const trusted = inGrantOrder.filter((s) => s.outcome !== 'lost');
  const violations: Violation[] = [];
  // The section reaching furthest so far: any later start before its end is an overlap.
  let furthest: SectionRecord | undefined;
  for (const section of trusted) {
    if (furthest) {
      const slack = furthest.pid === section.pid ? 0 : tolerance;
      const overlapMs = effectiveEnd(furthest, deaths) - section.start;
      if (overlapMs > slack) {
        violations.push({
          kind: 'overlap',
          key,
          detail:
            `${describe(furthest)} and ${describe(section)} both held the lock ` +
            `(overlap ${formatMs(overlapMs)})`,
        });
      }
    }
    if (!furthest || effectiveEnd(section, deaths) > effectiveEnd(furthest, deaths)) {
      furthest = section;
    }
  }
  return violations;
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

function findUnreleased(sections: SectionRecord[], deaths: Map<string, DeadInstance>): Violation[] {
  return sections
    .filter((s) => s.outcome === 'open' && !deaths.has(s.holder))
    .map((s) => ({
      kind: 'unreleased' as const,
      key: s.key,
      detail: `${describe(s)} was neither released nor reported lost`,
    }));
}

function findStuckLocks(
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
        detail: `still held by live instance ${lock.holder} after all work ended`,
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

function describe(section: SectionRecord): string {
  return `${section.worker} (fence ${section.fence}, ${section.outcome})`;
}

function formatMs(ms: number): string {
  return Number.isFinite(ms) ? `${ms.toFixed(2)} ms` : 'unbounded';
}
