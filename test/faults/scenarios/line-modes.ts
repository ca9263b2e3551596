import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { FaultServer } from '../../support/fault-server';
import { FaultRun } from '../harness/fault-run';
import { countByKind, settleWithin, sumStats } from '../harness/contend-checks';
import type { ModeMixEntry } from './modes-protocol';
import { checkModes, modes } from './modes-run';
import { Expectations, sleep, type Scenario, type ScenarioOutcome } from './scenario';

const ttlMs = 1000;
const timeoutMs = 6000;
const hold = { shortMaxMs: 40, longShare: 0.05, longMinMs: ttlMs * 1.1, longMaxMs: ttlMs * 1.4 };
const readersWriters: ModeMixEntry[] = [
  { mode: 'exclusive', share: 0.5, renewShare: 0.3, hold },
  { mode: 'shared', share: 0.5, renewShare: 0.3, hold },
];
const semaphore: ModeMixEntry[] = [
  { permits: 3, weight: 1, share: 0.6, renewShare: 0.3, hold },
  { permits: 3, weight: 2, share: 0.4, renewShare: 0.3, hold },
];

/**
 * Engine v2's modes under the mode-aware history checker: readers and writers on one key and
 * a semaphore of 3 permits (weights 1 and 2) on another, 4 processes × 3 workers on each key,
 * some holds past the lease; one process frozen with SIGSTOP past its lease, another killed.
 * No exclusive interval may overlap another, no permits may be exceeded, fences must grow.
 */
export async function runLineModesScenario(
  server: FaultServer,
  options: { libDir?: string; durationMs?: number } = {},
): Promise<ScenarioOutcome> {
  const run = new FaultRun(server, 'line_modes');
  const expect = new Expectations();
  try {
    const workers = await run.spawn(
      ['m0', 'm1', 'm2', 'm3'].map((label) => ({
        label,
        libDir: options.libDir,
        options: { engine: 'v2' as const },
      })),
    );
    const durationMs = options.durationMs ?? 8_000;
    const stopAt = sharedClockMs() + durationMs;
    const calls = workers.flatMap((worker) =>
      [
        { key: 'rw', mix: readersWriters },
        { key: 'sem', mix: semaphore },
      ].map(({ key, mix }) =>
        settleWithin(
          modes(worker).call('contendModes', {
            key,
            workers: 3,
            ttlMs,
            timeoutMs,
            mix,
            stopAt,
            maxSections: 2000,
            gapMaxMs: 20,
          }),
          stopAt + timeoutMs + ttlMs * 2 + 5000,
        ),
      ),
    );
    await sleep(durationMs * 0.3);
    run.pause(workers[1]);
    await sleep(ttlMs * 1.6);
    run.resume(workers[1]);
    await sleep(durationMs * 0.2);
    await run.kill(workers[3]);
    const settled = await Promise.all(calls);
    // The killed process's two calls end with it; the other six report.
    const stats = settled.flatMap((s) => ('stats' in s ? [s.stats] : []));
    const errors = stats.flatMap((s) => s.errors);
    expect.that(errors.length === 0, '*', `workers failed: ${errors.join('; ')}`);
    expect.that(stats.length === 6, '*', `${stats.length} of the 6 surviving calls reported`);
    const violations = await checkModes(run, { leaseMs: ttlMs }, expect.violations);
    const sections = run.history.sections.length;
    return {
      operations: sections,
      violations,
      notes:
        `${sections} sections, ${sumStats(stats, 'lost')} lost their lease, ` +
        `${sumStats(stats, 'timeouts')} timeouts; violations: ${countByKind(violations)}`,
    };
  } finally {
    await run.stop();
  }
}

export const lineModes: Scenario = {
  name: 'engine v2: readers/writers and a 3-permit semaphore, 4 processes, SIGSTOP, SIGKILL',
  run: (server) => runLineModesScenario(server),
};
