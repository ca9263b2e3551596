import type { VariantName } from '../adapters/bench-lock';
import { startVariantWorkers, stopWorkers, useVariant } from '../support/bench-worker';
import { commandsPerSection, rotated } from '../support/stats';
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
