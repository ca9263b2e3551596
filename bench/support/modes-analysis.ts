// Reading the section records of the modes suite: throughput in a window, holders at once
// (laid side by side on the shared clock), waits, and overtakes of a waiting requester.
import type { ModeLoopResult, SectionRecord } from '../worker-protocol';
import { round, summarize, type LatencySummary } from './stats';

export interface Window {
  startAt: number;
  endAt: number;
}

/** Sections of a set of processes in one window. */
export interface LoopGroup {
  results: ModeLoopResult[];
  /** Permits each section takes (1 for a lock holder). */
  weight: number;
}

export interface ThroughputSummary {
  /** Sections whose release was sent within the window. */
  sections: number;
  sectionsPerSecond: number;
  sectionsByProcess: number[];
  failures: number;
  errors: string[];
  commandsPerSection: number;
  commandsPerSectionByName: Record<string, number>;
  /** From asking to holding, every section of the window. */
  acquireWait: LatencySummary;
}

export function roundSummary(summary: LatencySummary): LatencySummary {
  return Object.fromEntries(
    Object.entries(summary).map(([name, value]) => [name, round(value, 2)]),
  ) as unknown as LatencySummary;
}

/** One run of the stream's loops (or several added up, `mergePhases`): what the report shows. */
export interface PhaseResult {
  name: string;
  window: { durationMs: number };
  stream: ThroughputSummary;
  concurrency: Concurrency;
}

/** A phase of one window, every section taking one permit. */
export function summarizePhase(
  name: string,
  window: Window,
  results: ModeLoopResult[],
): PhaseResult {
  return {
    name,
    window: { durationMs: window.endAt - window.startAt },
    stream: throughput(results, window),
    concurrency: concurrency([{ results, weight: 1 }]),
  };
}

/** Slices of one mode, run apart (interleaved with the other mode's), as one phase. */
export function mergePhases(
  name: string,
  phases: PhaseResult[],
  parts: ModeLoopResult[][],
): PhaseResult {
  // Throughput over the slices' total time.
  const durationMs = phases.reduce((total, p) => total + p.window.durationMs, 0);
  const sections = phases.reduce((total, p) => total + p.stream.sections, 0);
  const byProcess = phases[0].stream.sectionsByProcess.map((_, i) =>
    phases.reduce((total, p) => total + p.stream.sectionsByProcess[i], 0),
  );
  const waitsMs = parts.flat().flatMap((r) => r.sections.map((s) => s[1] - s[0]));
  const commandNames = new Set(
    phases.flatMap((p) => Object.keys(p.stream.commandsPerSectionByName)),
  );
  const weightedBySections = (pick: (p: PhaseResult) => number) =>
    Math.round(
      (phases.reduce((total, p) => total + pick(p) * p.stream.sections, 0) /
        Math.max(sections, 1)) *
        100,
    ) / 100;
  return {
    name,
    window: { durationMs },
    stream: {
      sections,
      sectionsPerSecond: Math.round((sections / durationMs) * 10_000) / 10,
      sectionsByProcess: byProcess,
      failures: phases.reduce((total, p) => total + p.stream.failures, 0),
      errors: phases.flatMap((p) => p.stream.errors),
      commandsPerSection: weightedBySections((p) => p.stream.commandsPerSection),
      commandsPerSectionByName: Object.fromEntries(
        [...commandNames].map((n) => [
          n,
          weightedBySections((p) => p.stream.commandsPerSectionByName[n] ?? 0),
        ]),
      ),
      acquireWait: roundSummary(summarize(waitsMs)),
    },
    concurrency: {
      maxHolders: Math.max(...phases.map((p) => p.concurrency.maxHolders)),
      maxWeight: Math.max(...phases.map((p) => p.concurrency.maxWeight)),
      sharedTimeShare:
        Math.round(
          (phases.reduce((t, p) => t + p.concurrency.sharedTimeShare, 0) / phases.length) * 1000,
        ) / 1000,
    },
  };
}

/** Commands per section, in all and by name: `9.09 (findAndModify 5.11, getMore 3.96)`. */
export function commandsText(stream: ThroughputSummary): string {
  const parts = Object.entries(stream.commandsPerSectionByName)
    .filter(([, n]) => n >= 0.01)
    .map(([name, n]) => `${name} ${n}`);
  return `${stream.commandsPerSection} (${parts.join(', ')})`;
}

const inWindow = (s: SectionRecord, w: Window) => s[0] >= w.startAt && s[2] <= w.endAt;

export function throughput(results: ModeLoopResult[], window: Window): ThroughputSummary {
  const seconds = (window.endAt - window.startAt) / 1000;
  const counted = results.map((r) => r.sections.filter((s) => inWindow(s, window)));
  const sections = counted.reduce((total, list) => total + list.length, 0);
  const commands: Record<string, number> = {};
  for (const r of results) {
    for (const [name, n] of Object.entries(r.commands)) commands[name] = (commands[name] ?? 0) + n;
  }
  // Commands are counted over every section the processes ran (the drained ones too).
  const ran = results.reduce((total, r) => total + r.sections.length, 0);
  const totalCommands = Object.values(commands).reduce((total, n) => total + n, 0);
  return {
    sections,
    sectionsPerSecond: round(sections / seconds, 1),
    sectionsByProcess: counted.map((list) => list.length),
    failures: results.reduce((total, r) => total + r.failures, 0),
    errors: results.flatMap((r) => r.errors),
    commandsPerSection: round(totalCommands / Math.max(ran, 1), 2),
    commandsPerSectionByName: Object.fromEntries(
      Object.entries(commands)
        .sort(([, a], [, b]) => b - a)
        .map(([name, n]) => [name, round(n / Math.max(ran, 1), 2)]),
    ),
    acquireWait: roundSummary(summarize(counted.flat().map((s) => s[1] - s[0]))),
  };
}

export interface Concurrency {
  /** Most sections held at once, as seen from the clients (acquire resolved → release sent). */
  maxHolders: number;
  /** Most permits held at once (holders × their weight). */
  maxWeight: number;
  /** Time with at least two holders at once, as a share of the time with at least one. */
  sharedTimeShare: number;
}

/**
 * Holders at once, from every section of every group. Each interval lies inside the holder's
 * lease on the server (the lease begins before the reply, ends after the release reaches the
 * server), so a count above the limit here is a real overlap, not an artefact of timing; only
 * the processes' shared clock (same machine) could blur it, by far less than a round trip.
 */
export function concurrency(groups: LoopGroup[]): Concurrency {
  const events: { at: number; holders: number; weight: number }[] = [];
  for (const group of groups) {
    for (const r of group.results) {
      for (const s of r.sections) {
        events.push({ at: s[1], holders: 1, weight: group.weight });
        events.push({ at: s[2], holders: -1, weight: -group.weight });
      }
    }
  }
  // Ends before starts at the same instant.
  events.sort((a, b) => a.at - b.at || a.holders - b.holders);
  let holders = 0;
  let weight = 0;
  let maxHolders = 0;
  let maxWeight = 0;
  let busySince = 0;
  let sharedSince = 0;
  let busyMs = 0;
  let sharedMs = 0;
  for (const event of events) {
    const before = holders;
    holders += event.holders;
    weight += event.weight;
    maxHolders = Math.max(maxHolders, holders);
    maxWeight = Math.max(maxWeight, weight);
    if (before === 0 && holders > 0) busySince = event.at;
    if (before > 0 && holders === 0) busyMs += event.at - busySince;
    if (before < 2 && holders >= 2) sharedSince = event.at;
    if (before >= 2 && holders < 2) sharedMs += event.at - sharedSince;
  }
  return { maxHolders, maxWeight, sharedTimeShare: busyMs > 0 ? round(sharedMs / busyMs, 3) : 0 };
}

/** Sections of `others` that overlap a section of `exclusive` (there must be none). */
export function exclusionViolations(
  exclusive: ModeLoopResult[],
  others: ModeLoopResult[],
): { count: number; worstOverlapMs: number } {
  const held = exclusive.flatMap((r) => r.sections).sort((a, b) => a[1] - b[1]);
  let count = 0;
  let worstOverlapMs = 0;
  for (const s of others.flatMap((r) => r.sections)) {
    for (const w of held) {
      if (w[1] >= s[2]) break;
      const overlap = Math.min(s[2], w[2]) - Math.max(s[1], w[1]);
      if (overlap > 0) {
        count++;
        worstOverlapMs = Math.max(worstOverlapMs, overlap);
      }
    }
  }
  return { count, worstOverlapMs: round(worstOverlapMs, 2) };
}

export interface WaitSummary extends LatencySummary {
  /**
   * Waits longer than 1 s: a wait that missed its wake-up sits until its entry's renewal, a
   * third of its lease in.
   */
  over1s: number;
  /** The longest waits, in ms. */
  longest: number[];
  /** Requests still waiting when the window ended (the others stopped asking then). */
  endedAfterWindow: number;
  /**
   * Sections of the others granted while this requester waited, after its first command (its
   * join) had replied (its entry was in the key's line by then), that took room it needed: with
   * them the others held more than `roomLeft` permits (0 for an exclusive requester: any holder
   * is in its way). Per wait, and in total. Entries that joined ahead of it can still come to
   * hold; a stream of them would be the overtaking the line's order is there to prevent.
   */
  overtakes: { p50: number; p95: number; max: number; total: number };
  /** Sections of the others granted at any point of the waits, in total. */
  grantsWhileWaiting: number;
  /** Waits by quarter of the window (by when they were asked): growth would show here. */
  byQuarter: { count: number; p50: number; max: number }[];
  /**
   * Each wait in two parts: until the last of the others' releases sent before its grant
   * (the holders in its way draining), and from that release to its grant (the hand-off).
   */
  drainMs: LatencySummary;
  handoffMs: LatencySummary;
}

/**
 * Waits of `requester` amid `others`, each of whose sections takes `otherWeight` permits;
 * `roomLeft`: the most the others may hold with the requester still fitting in.
 */
export function waits(
  requester: ModeLoopResult[],
  others: ModeLoopResult[],
  window: Window,
  room: { otherWeight: number; roomLeft: number },
): WaitSummary {
  const mine = requester.flatMap((r) => r.sections);
  const theirs = others.flatMap((r) => r.sections).sort((a, b) => a[1] - b[1]);
  const grants = theirs.map((s) => s[1]);
  /** Permits the others held just after the grant at `at` (client-side intervals). */
  const heldAt = (at: number) =>
    theirs.filter((s) => s[1] <= at && s[2] > at).length * room.otherWeight;
  const grantsBetween = (from: number, to: number) => grants.filter((at) => at > from && at < to);
  const overtakes = mine.map((s) =>
    s[3] === undefined
      ? 0
      : grantsBetween(s[3], s[1]).filter((at) => heldAt(at) > room.roomLeft).length,
  );
  const overtakeSummary = summarize(overtakes);
  const waitMs = mine.map((s) => s[1] - s[0]);
  const quarterMs = (window.endAt - window.startAt) / 4;
  const releases = theirs.map((x) => x[2]).sort((a, b) => a - b);
  const lastReleaseBefore = (at: number) => {
    let last = Number.NEGATIVE_INFINITY;
    for (const r of releases) {
      if (r >= at) break;
      last = r;
    }
    return last;
  };
  const split = mine.map((x) => {
    const drainedAt = Math.max(x[0], lastReleaseBefore(x[1]));
    return { drain: drainedAt - x[0], handoff: x[1] - drainedAt };
  });
  return {
    ...roundSummary(summarize(waitMs)),
    over1s: waitMs.filter((x) => x > 1000).length,
    longest: [...waitMs]
      .sort((a, b) => b - a)
      .slice(0, 5)
      .map((x) => round(x, 1)),
    endedAfterWindow: mine.filter((s) => s[1] > window.endAt).length,
    overtakes: {
      p50: overtakeSummary.p50,
      p95: overtakeSummary.p95,
      max: overtakeSummary.max,
      total: overtakes.reduce((total, n) => total + n, 0),
    },
    grantsWhileWaiting: mine.reduce((total, s) => total + grantsBetween(s[0], s[1]).length, 0),
    byQuarter: [0, 1, 2, 3].map((q) => {
      const from = window.startAt + q * quarterMs;
      const inQuarter = mine
        .filter((s) => s[0] >= from && (q === 3 || s[0] < from + quarterMs))
        .map((s) => s[1] - s[0]);
      const summary = summarize(inQuarter);
      return { count: summary.count, p50: round(summary.p50, 1), max: round(summary.max, 1) };
    }),
    drainMs: roundSummary(summarize(split.map((x) => x.drain))),
    handoffMs: roundSummary(summarize(split.map((x) => x.handoff))),
  };
}
