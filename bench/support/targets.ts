import type { CommandSizesResult, LockType } from '../suites/command-sizes';
import { shapeLabel, type ContentionRow } from '../suites/contention';
import type { ThroughputResult } from '../suites/throughput';
import type { BenchResults, VariantResult } from './report';

export interface TargetCheck {
  what: string;
  target: string;
  measured: string;
  met: boolean;
}

/**
 * Targets set from measured runs (see BENCHMARKS.md for the reasoning). Physical limits are
 * targets themselves; latencies are in units of one ping round trip so they travel between
 * machines.
 */
export const targets = {
  commandsPerAcquire: 1,
  commandsPerRelease: 1,
  handoffP50InPings: 5,
  handoffP99InPings: 40,
  changeStreamsPerProcess: 1,
  attemptsPerRelease: 1,
  heapBytesPerWaiter: 6144,
  /** Parked waiters' traffic while nothing happens, per key (its one entry in line). */
  parkedBytesPerSecondPerKey: 100,
  /** The change-stream median may be this much slower than polling every 10 ms, no more. */
  handoffVsPoll10msRatio: 1.2,
  httpAddedP50InPings: 6,
  /** The hand-off over the change-event floor: what the lock adds to the event carrying it. */
  handoffP50ToEventFloor: 1.2,
  handoffP99ToEventFloor: 1.5,
  /** The shape matrix, ours at every P × W shape: sections/s over mongodash's, at least. */
  shapeVsMongodash: 1.5,
  shapeCommandsPerSection: 2.5,
  /** The busiest process's sections over the least busy one's. */
  shapeShareMaxOverMin: 1.5,
  /** Commands per section at 8 × 1 over those at 2 × 1, at most. */
  commandsAt8x1Over2x1: 1.3,
  /** The largest command of each lock type, in bytes (BSON size of the command document). */
  commandBytes: { mutex: 1024, shared: 2048, semaphore: 2048 } satisfies Record<LockType, number>,
  /** Top-level fields of a mutex's document after a hand-off. */
  lockDocumentFields: 8,
};

/** One shape of the matrix: ours, mongodash if measured, and ours over it in sections/s. */
export interface ShapeComparison {
  shape: string;
  ours: ThroughputResult;
  mongodash?: ThroughputResult;
  ratio?: number;
}

export function compareShapes(rows: ContentionRow[]): ShapeComparison[] {
  return rows
    .filter((row) => row.variant === 'ours')
    .map((row) => {
      const shape = shapeLabel(row);
      const peer = rows.find((r) => r.variant === 'mongodash' && shapeLabel(r) === shape);
      return {
        shape,
        ours: row.throughput,
        mongodash: peer?.throughput,
        ratio: peer
          ? row.throughput.sectionsPerSecond / Math.max(peer.throughput.sectionsPerSecond, 0.1)
          : undefined,
      };
    });
}

/** Each lock type's largest command of any kind. */
export function largestCommands(sizes: CommandSizesResult) {
  return (Object.keys(targets.commandBytes) as LockType[]).map((lockType) => {
    const largest = sizes.rows
      .filter((row) => row.lockType === lockType && row.bytes !== null)
      .sort((x, y) => y.bytes! - x.bytes!)[0];
    return { lockType, largest, limit: targets.commandBytes[lockType] };
  });
}

function variant(results: BenchResults, name: VariantResult['variant']): VariantResult | undefined {
  return results.variants.find((v) => v.variant === name);
}

/** A variant's hand-off against the change-event floor, at p50 and p99. */
function eventFloorChecks(results: BenchResults, v: VariantResult): TargetCheck[] {
  const floor = results.eventFloor;
  const { handoff } = v;
  if (!floor || handoff.ratioP50ToEventFloor === undefined) return [];
  const checks: TargetCheck[] = [
    {
      what: 'hand-off p50 / change-event floor p50',
      target: `≤ ${targets.handoffP50ToEventFloor}`,
      measured: `${handoff.ratioP50ToEventFloor} (${handoff.p50.toFixed(2)} against ${floor.p50.toFixed(2)} ms)`,
      met: handoff.ratioP50ToEventFloor <= targets.handoffP50ToEventFloor,
    },
  ];
  if (handoff.ratioP99ToEventFloor !== undefined) {
    checks.push({
      what: 'hand-off p99 / change-event floor p99',
      target: `≤ ${targets.handoffP99ToEventFloor}`,
      measured: `${handoff.ratioP99ToEventFloor} (${handoff.p99.toFixed(2)} against ${floor.p99.toFixed(2)} ms)`,
      met: handoff.ratioP99ToEventFloor <= targets.handoffP99ToEventFloor,
    });
  }
  return checks;
}

export function checkTargets(results: BenchResults): TargetCheck[] {
  const checks: TargetCheck[] = [];
  const ours = variant(results, 'ours');
  if (ours) {
    checks.push(
      {
        what: 'commands per uncontended acquire',
        target: `${targets.commandsPerAcquire} (the limit)`,
        measured: `${ours.roundTrips.acquireFreeKey} (new key: ${ours.roundTrips.acquireNewKey})`,
        met:
          Math.max(ours.roundTrips.acquireFreeKey, ours.roundTrips.acquireNewKey) <=
          targets.commandsPerAcquire,
      },
      {
        what: 'commands per release',
        target: `${targets.commandsPerRelease} (the limit)`,
        measured: String(ours.roundTrips.release),
        met: ours.roundTrips.release <= targets.commandsPerRelease,
      },
      {
        what: 'hand-off p50 between processes',
        target: `≤ ${targets.handoffP50InPings} pings`,
        measured:
          `${ours.handoff.ratioP50ToPing} pings (${ours.handoff.p50.toFixed(2)} ms); ` +
          `${ours.handoff.ratioP50ToPingAfterIdle} pings after the same idle wait` +
          (results.eventFloor
            ? `; the change-event floor alone is ${(results.eventFloor.p50 / results.ping.p50).toFixed(1)} pings, the hand-off ${ours.handoff.ratioP50ToEventFloor} of it`
            : ''),
        met: ours.handoff.ratioP50ToPing <= targets.handoffP50InPings,
      },
      {
        what: 'hand-off p99 between processes',
        target: `≤ ${targets.handoffP99InPings} pings`,
        measured: `${ours.handoff.ratioP99ToPing} pings (${ours.handoff.p99.toFixed(2)} ms)`,
        met: ours.handoff.ratioP99ToPing <= targets.handoffP99InPings,
      },
    );
    checks.push(...eventFloorChecks(results, ours));
    const peers = results.variants.filter((v) => v.variant !== 'ours');
    for (const peer of peers) {
      // Polling every 10 ms is the latency floor of polling; matching it is the goal there.
      const limit = peer.variant === 'ours-poll-10ms' ? targets.handoffVsPoll10msRatio : 1;
      checks.push({
        what: `hand-off p50 vs ${peer.variant}`,
        target: limit === 1 ? 'faster' : `within ${limit}× of it`,
        measured: `${(ours.handoff.p50 / peer.handoff.p50).toFixed(2)}× its p50`,
        met: ours.handoff.p50 < peer.handoff.p50 * limit,
      });
    }
    const dash = variant(results, 'mongodash');
    if (dash) {
      checks.push({
        what: 'contended throughput vs mongodash',
        target: 'higher',
        measured: `${(ours.throughput.sectionsPerSecond / Math.max(dash.throughput.sectionsPerSecond, 0.1)).toFixed(1)}×`,
        met: ours.throughput.sectionsPerSecond > dash.throughput.sectionsPerSecond,
      });
    }
  }
  if (!('error' in results.contention)) checks.push(...shapeChecks(results.contention));
  const sizes = results.commandSizes;
  if (!('error' in sizes)) {
    for (const { lockType, largest, limit } of largestCommands(sizes)) {
      if (!largest) continue;
      checks.push({
        what: `largest ${lockType} command`,
        target: `≤ ${limit} B`,
        measured: `${largest.bytes} B (${largest.kind}: ${largest.command})`,
        met: largest.bytes! <= limit,
      });
    }
    const fields = sizes.documentAfterHandoff.fields.length;
    checks.push({
      what: 'top-level fields of a mutex document after a hand-off',
      target: `≤ ${targets.lockDocumentFields}`,
      measured: String(fields),
      met: fields <= targets.lockDocumentFields,
    });
  }
  const scale = results.scale;
  if (!('error' in scale)) {
    checks.push(
      {
        what: `change streams open for ${scale.waiters} waiters`,
        target: String(targets.changeStreamsPerProcess),
        measured: String(scale.changeStreamsOpenAtPeak),
        met: scale.changeStreamsOpenAtPeak <= targets.changeStreamsPerProcess,
      },
      {
        what: 'acquire attempts per release (per process)',
        target: String(targets.attemptsPerRelease),
        measured: scale.attemptsPerRelease.toFixed(2),
        met: scale.attemptsPerRelease <= targets.attemptsPerRelease,
      },
      {
        what: 'heap per waiter',
        target: `≤ ${targets.heapBytesPerWaiter} B`,
        measured: `${scale.heapBytesPerWaiter} B`,
        met: scale.heapBytesPerWaiter <= targets.heapBytesPerWaiter,
      },
      {
        what: 'bytes per second and key while parked',
        target: `≤ ${targets.parkedBytesPerSecondPerKey} B`,
        measured: `${scale.parkedBytesPerSecondPerKey} B`,
        met: scale.parkedBytesPerSecondPerKey <= targets.parkedBytesPerSecondPerKey,
      },
      {
        what: `waits failed while ${scale.waiters} waited`,
        target: '0',
        measured: String(scale.failedWaits),
        met: scale.failedWaits === 0,
      },
    );
  }
  if (!('error' in results.httpOverhead)) {
    // In pings from the process the requests ran in, taken between them.
    const added = results.httpOverhead.addedP50Ms / results.httpOverhead.ping.p50;
    checks.push({
      what: '@Locked added latency, p50',
      target: `≤ ${targets.httpAddedP50InPings} pings`,
      measured: `${added.toFixed(1)} pings (${results.httpOverhead.addedP50Ms.toFixed(2)} ms)`,
      met: added <= targets.httpAddedP50InPings,
    });
  }
  return checks;
}

/** The shape matrix against the targets, each over every shape measured. */
function shapeChecks(rows: ContentionRow[]): TargetCheck[] {
  const shapes = compareShapes(rows);
  if (shapes.length === 0) return [];
  const each = (value: (s: ShapeComparison) => string) =>
    shapes.map((s) => `${s.shape}: ${value(s)}`).join('; ');
  const checks: TargetCheck[] = [];
  if (shapes.every((s) => s.ratio !== undefined)) {
    checks.push({
      what: 'shape matrix: sections/s vs mongodash',
      target: `≥ ${targets.shapeVsMongodash}× at every P × W`,
      measured: each((s) => `${s.ratio!.toFixed(2)}×`),
      met: shapes.every((s) => s.ratio! >= targets.shapeVsMongodash),
    });
  }
  checks.push(
    {
      what: 'shape matrix: commands per section',
      target: `≤ ${targets.shapeCommandsPerSection} at every P × W`,
      measured: each((s) => String(s.ours.commandsPerSection)),
      met: shapes.every((s) => s.ours.commandsPerSection <= targets.shapeCommandsPerSection),
    },
    {
      what: 'shape matrix: sections of the busiest process / the least busy',
      target: `≤ ${targets.shapeShareMaxOverMin} at every P × W`,
      measured: each((s) => String(s.ours.shareMaxOverMin ?? 'one did none')),
      met: shapes.every(
        (s) =>
          s.ours.shareMaxOverMin !== null && s.ours.shareMaxOverMin <= targets.shapeShareMaxOverMin,
      ),
    },
    {
      what: 'shape matrix: failed waits (timeouts, errors)',
      target: '0',
      measured: String(shapes.reduce((total, s) => total + s.ours.failures, 0)),
      met: shapes.every((s) => s.ours.failures === 0),
    },
  );
  const at = (shape: string) => shapes.find((s) => s.shape === shape)?.ours.commandsPerSection;
  const [wide, narrow] = [at('8 × 1'), at('2 × 1')];
  if (wide !== undefined && narrow !== undefined) {
    checks.push({
      what: 'commands per section flat in P: 8 × 1 against 2 × 1',
      target: `within ${targets.commandsAt8x1Over2x1}×`,
      measured: `${wide} against ${narrow} (${(wide / narrow).toFixed(2)}×)`,
      met: wide <= narrow * targets.commandsAt8x1Over2x1,
    });
  }
  return checks;
}
