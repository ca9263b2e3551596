import type { VariantName } from '../adapters/bench-lock';
import { spawnBenchWorkers, stopBenchWorkers, useVariant } from '../support/bench-workers';
import { commandsPerSection, rotated } from '../support/stats';
import { combineThroughput, measureThroughput, type ThroughputResult } from './throughput';

export interface ContentionOptions {
  processCounts: number[];
  variants: VariantName[];
  workersPerProcess: number;
  criticalSectionMs: number;
  /** Interleaved rounds per process count; each variant runs one slice per round. */
  rounds: number;
  /** Each slice's counted time, after `warmupMs` not counted. */
  sliceMs: number;
  warmupMs: number;
  serverPid?: number;
}

export interface ContentionRow {
  processes: number;
  variant: VariantName;
  throughput: ThroughputResult;
}

/**
 * How the cost of a critical section grows with the number of processes contending for one
 * key: for each P, P fresh worker processes (nothing else connected), the variants taking
 * turns slice by slice, commands counted on the wire and CPU per section.
 */
export async function measureContention(
  uri: string,
  options: ContentionOptions,
  log: (message: string) => void,
): Promise<ContentionRow[]> {
  const rows: ContentionRow[] = [];
  for (const processes of options.processCounts) {
    const workers = await spawnBenchWorkers(options.variants, processes, {
      uri,
      dbName: `bench_p${processes}`,
    });
    try {
      const slices = new Map<VariantName, ThroughputResult[]>(options.variants.map((v) => [v, []]));
      for (let round = 0; round < options.rounds; round++) {
        for (const variant of rotated(options.variants, round)) {
          await useVariant(workers, variant);
          slices.get(variant)!.push(
            await measureThroughput(workers, {
              key: 'contention',
              workersPerProcess: options.workersPerProcess,
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
        rows.push({ processes, variant, throughput });
        log(
          `contention P=${processes} ${variant}: ${throughput.sectionsPerSecond} sections/s, ` +
            `${throughput.commandsPerSection} commands/section, ` +
            `${throughput.cpuPerSection.total} CPU µs/section, failures ${throughput.failures}, ` +
            `share max/min ${shareSpread(throughput.sectionsByProcess)}; per section: ` +
            commandsPerSection(throughput.commands, throughput.sections),
        );
      }
    } finally {
      await stopBenchWorkers(workers);
    }
  }
  return rows;
}

/** The busiest process's sections over the least busy one's: 1 is perfectly fair. */
function shareSpread(sectionsByProcess: number[]): string {
  const least = Math.min(...sectionsByProcess);
  return least === 0 ? 'unbounded' : (Math.max(...sectionsByProcess) / least).toFixed(2);
}
