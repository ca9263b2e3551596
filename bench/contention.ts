// `npm run bench:contention`: the shape matrix of `npm run bench` alone, for quick
// comparisons between commits: P processes × W callers on one key, the variants taking turns
// slice by slice, with commands and CPU (callers' processes and server) per section.
// BENCH_SHAPES (P x W, e.g. 2x1,8x1), else BENCH_CONTENTION_PROCESSES (default 4) ×
// BENCH_CONTENTION_WORKERS (callers per process, 4); BENCH_CONTENTION_ROUNDS (2),
// BENCH_CONTENTION_SLICE_MS (3000), BENCH_CONTENTION_VARIANTS (ours,mongodash).
import { variantNames, type VariantName } from './adapters/bench-lock';
import { startBenchServer } from './support/bench-process';
import { measureContention, parseShapes, shapeLabel } from './suites/contention';

const list = (name: string, fallback: string) => (process.env[name] ?? fallback).split(',');

async function main(): Promise<void> {
  const callers = process.env.BENCH_CONTENTION_WORKERS ?? '4';
  const shapes = parseShapes(
    process.env.BENCH_SHAPES ??
      list('BENCH_CONTENTION_PROCESSES', '4')
        .map((p) => `${p}x${callers}`)
        .join(','),
  );
  const server = await startBenchServer();
  try {
    const rows = await measureContention(
      server.uri,
      {
        shapes,
        variants: list('BENCH_CONTENTION_VARIANTS', 'ours,mongodash').filter(
          (v): v is VariantName => (variantNames as readonly string[]).includes(v),
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
  } finally {
    await server.stop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`);
  process.exitCode = 1;
});
