// `npm run bench:contention`: the contention scan of `npm run bench` alone, for quick
// comparisons between commits: P processes × 4 callers on one key, the variants taking turns
// slice by slice, with commands and CPU (callers' processes and server) per section.
// BENCH_CONTENTION_PROCESSES (default 4), BENCH_CONTENTION_WORKERS (callers per process, 4),
// BENCH_CONTENTION_ROUNDS (2),
// BENCH_CONTENTION_SLICE_MS (3000), BENCH_CONTENTION_VARIANTS (ours,mongodash).
import { variantNames, type VariantName } from './adapters/bench-lock';
import { startBenchServer } from './support/bench-process';
import { measureContention } from './suites/contention';

const list = (name: string, fallback: string) => (process.env[name] ?? fallback).split(',');

async function main(): Promise<void> {
  const server = await startBenchServer();
  try {
    const rows = await measureContention(
      server.uri,
      {
        processCounts: list('BENCH_CONTENTION_PROCESSES', '4').map(Number),
        variants: list('BENCH_CONTENTION_VARIANTS', 'ours,mongodash').filter(
          (v): v is VariantName => (variantNames as readonly string[]).includes(v),
        ),
        workersPerProcess: Number(process.env.BENCH_CONTENTION_WORKERS ?? 4),
        criticalSectionMs: 1,
        rounds: Number(process.env.BENCH_CONTENTION_ROUNDS ?? 2),
        sliceMs: Number(process.env.BENCH_CONTENTION_SLICE_MS ?? 3000),
        warmupMs: Number(process.env.BENCH_WARMUP_MS ?? 250),
        serverPid: server.pid,
      },
      (message) => process.stdout.write(`${message}\n`),
    );
    for (const { processes, variant, throughput } of rows) {
      const { workers, server: serverCpu } = throughput.cpuPerSection;
      process.stdout.write(
        `P=${processes} ${variant}: CPU µs/section in the callers' processes ${workers}, ` +
          `in the server ${serverCpu ?? 'unknown'}\n`,
      );
    }
  } finally {
    await server.stop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`);
  process.exitCode = 1;
});
