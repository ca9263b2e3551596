// The shape matrix: measured within the main suite, and alone (`--suite=contention`) for quick
// comparisons between commits.
import { variantNames, type VariantName } from '../adapters/bench-lock';
import { startVariantWorkers, stopWorkers, useVariant } from '../support/bench-worker';
import { commandsPerSection, rotated } from '../support/stats';
import type { SuiteContext } from '../support/suite';
import { combineThroughput, measureThroughput, type ThroughputResult } from './throughput';

/** P processes × W callers per process, all on one key. */
export interface Shape {
  processes: number;
  workersPerProcess: number;
}

/** `'2x1,4x4'` → shapes (P × W); throws on anything else. */
export function parseShapes(text: string): Shape[] {
  return text.split(',').map((part) => {
    const match = /^\s*(\d+)\s*[x×]\s*(\d+)\s*$/.exec(part);
    if (!match || Number(match[1]) < 1 || Number(match[2]) < 1) {
      throw new Error(`a shape is P x W, such as 2x1: got ${JSON.stringify(part)}`);
    }
    return { processes: Number(match[1]), workersPerProcess: Number(match[2]) };
  });
}

export const shapeLabel = (s: Shape) => `${s.processes} × ${s.workersPerProcess}`;

export interface ContentionOptions {
  shapes: Shape[];
  variants: VariantName[];
  criticalSectionMs: number;
  /** Interleaved rounds per shape; each variant runs one slice per round. */
  rounds: number;
  /** Each slice's counted time, after `warmupMs` not counted. */
  sliceMs: number;
  warmupMs: number;
  serverPid?: number;
}

export interface ContentionRow extends Shape {
  variant: VariantName;
  throughput: ThroughputResult;
}

/**
 * How the cost of a critical section changes with the shape of the contention on one key:
 * for each P × W, P fresh worker processes (nothing else connected) of W callers each, the
 * variants taking turns slice by slice, commands counted on the wire and CPU per section.
 */
export async function measureContention(
  uri: string,
  options: ContentionOptions,
  log: (message: string) => void,
): Promise<ContentionRow[]> {
  const rows: ContentionRow[] = [];
  for (const shape of options.shapes) {
    const { processes, workersPerProcess } = shape;
    const workers = await startVariantWorkers(options.variants, processes, {
      uri,
      dbName: `bench_${processes}x${workersPerProcess}`,
    });
    try {
      const slices = new Map<VariantName, ThroughputResult[]>(options.variants.map((v) => [v, []]));
      for (let round = 0; round < options.rounds; round++) {
        for (const variant of rotated(options.variants, round)) {
          await useVariant(workers, variant);
          slices.get(variant)!.push(
            await measureThroughput(workers, {
              key: 'contention',
              workersPerProcess,
              warmupMs: options.warmupMs,
              durationMs: options.sliceMs,
              criticalSectionMs: options.criticalSectionMs,
              serverPid: options.serverPid,
            }),
          );
        }
      }
      for (const variant of options.variants) {
        const throughput = combineThroughput(slices.get(variant)!);
        rows.push({ processes, workersPerProcess, variant, throughput });
        log(
          `contention ${shapeLabel(shape)} ${variant}: ${throughput.sectionsPerSecond} sections/s, ` +
            `${throughput.commandsPerSection} commands/section, ` +
            `${throughput.cpuPerSection.total} CPU µs/section, failures ${throughput.failures}, ` +
            `share max/min ${throughput.shareMaxOverMin ?? 'unbounded'}; per section: ` +
            commandsPerSection(throughput.commands, throughput.sections),
        );
      }
    } finally {
      await stopWorkers(workers);
    }
  }
  return rows;
}

const list = (name: string, fallback: string) => (process.env[name] ?? fallback).split(',');

/**
 * The contention suite: the main suite's shape matrix alone, P processes × W callers on one
 * key, the variants taking turns slice by slice, with commands and CPU (callers' processes and
 * server) per section. Printed, not written. BENCH_SHAPES (P x W, e.g. 2x1,8x1), else
 * BENCH_CONTENTION_PROCESSES (default 4) × BENCH_CONTENTION_WORKERS (callers per process, 4);
 * BENCH_CONTENTION_ROUNDS (2), BENCH_CONTENTION_SLICE_MS (3000), BENCH_CONTENTION_VARIANTS
 * (ours,mongodash).
 */
export async function runContentionSuite({ server }: SuiteContext): Promise<string[]> {
  const callers = process.env.BENCH_CONTENTION_WORKERS ?? '4';
  const shapes = parseShapes(
    process.env.BENCH_SHAPES ??
      list('BENCH_CONTENTION_PROCESSES', '4')
        .map((p) => `${p}x${callers}`)
        .join(','),
  );
  const rows = await measureContention(
    server.uri,
    {
      shapes,
      variants: list('BENCH_CONTENTION_VARIANTS', 'ours,mongodash').filter((v): v is VariantName =>
        (variantNames as readonly string[]).includes(v),
      ),
      criticalSectionMs: 1,
      rounds: Number(process.env.BENCH_CONTENTION_ROUNDS ?? 2),
      sliceMs: Number(process.env.BENCH_CONTENTION_SLICE_MS ?? 3000),
      warmupMs: Number(process.env.BENCH_WARMUP_MS ?? 250),
      serverPid: server.pid,
    },
    (message) => process.stdout.write(`${message}\n`),
  );
  for (const row of rows) {
    const { workers, server: serverCpu } = row.throughput.cpuPerSection;
    process.stdout.write(
      `${shapeLabel(row)} ${row.variant}: CPU µs/section in the callers' processes ${workers}, ` +
        `in the server ${serverCpu ?? 'unknown'}\n`,
    );
  }
  return [];
}
