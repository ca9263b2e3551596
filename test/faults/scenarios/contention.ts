import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { SectionRecord } from '../history/history';
import type { ContendStats } from '../../support/fault-protocol';
import { FaultRun } from '../harness/fault-run';
import type { FaultServer } from '../../support/fault-server';
import { Expectations, type Scenario, type ScenarioOutcome } from './scenario';

const processes = 4;
const workersPerProcess = 8;
const ttlMs = 1000;

/**
 * 4 processes × 8 workers on 3 keys, random holds (2 % of them longer than the lease), half of
 * the acquisitions renewed and half not: the unrenewed long holds must be reported lost, and
 * nothing may overlap that was not.
 */
export const contention: Scenario = {
  name: '1. contention: 4 processes x 8 workers, 3 keys',
  run: (server) => runContentionScenario(server),
};

/**
 * The same with `localHandOff: false`: every hand-off between callers of one process goes
 * through the lock document, so the history checker sees that path too.
 */
export const contentionWithoutLocalHandOff: Scenario = {
  name: '1b. contention without local hand-off: 4 processes x 8 workers, 3 keys, 10 s',
  run: (server) =>
    runContentionScenario(server, { durationMs: 10_000, serviceOptions: { localHandOff: false } }),
};

/**
 * The contention scenario; `libDir` (the mutation test's broken copies), `durationMs`
 * (default `FAULT_CONTENTION_MS`, else 15 s) for shorter runs, and the workers' module options.
 */
export async function runContentionScenario(
  server: FaultServer,
  options: { libDir?: string; durationMs?: number; serviceOptions?: Record<string, unknown> } = {},
): Promise<ScenarioOutcome> {
  const run = new FaultRun(server, 'contention');
  const expect = new Expectations();
  try {
    const workers = await run.spawn(
      Array.from({ length: processes }, (_, i) => ({
        label: `p${i}`,
        libDir: options.libDir,
        options: options.serviceOptions,
      })),
    );
    const durationMs = options.durationMs ?? Number(process.env.FAULT_CONTENTION_MS ?? 15_000);
    const stopAt = sharedClockMs() + durationMs;
    const stats: ContendStats[] = await Promise.all(
      workers.map((w) =>
        w.process.call('contend', {
          keys: ['contention:a', 'contention:b', 'contention:c'],
          workers: workersPerProcess,
          ttlMs,
          timeoutMs: 20_000,
          hold: {
            shortMaxMs: 8,
            longShare: 0.02,
            longMinMs: ttlMs * 1.2,
            longMaxMs: ttlMs * 1.6,
          },
          renewShare: 0.5,
          stopAt,
          maxSections: 2000,
        }),
      ),
    );
    const total = stats.reduce(
      (sum, s) => ({
        sections: sum.sections + s.sections,
        lost: sum.lost + s.lost,
        timeouts: sum.timeouts + s.timeouts,
        errors: [...sum.errors, ...s.errors],
      }),
      { sections: 0, lost: 0, timeouts: 0, errors: [] as string[] },
    );
    expect.that(total.errors.length === 0, '*', `workers failed: ${total.errors.join('; ')}`);
    expect.that(
      run.history.sections.length === total.sections,
      '*',
      `${total.sections} sections counted, ${run.history.sections.length} reported`,
    );
    const violations = await run.check({ leaseMs: ttlMs }, expect.violations);
    const late = lateLossNotices(run.history.sections);
    return {
      operations: total.sections,
      violations,
      notes:
        `${total.lost} reported lost (${late} of them after the next holder began), ` +
        `${total.timeouts} waits timed out`,
    };
  } finally {
    await run.stop();
  }
}

/**
 * Lost holders that stopped working only after the next holder of the key had started. Allowed
 * (they were told), but a live, unpaused holder should be told at its local deadline, before
 * the lease ends by the server clock: a non-zero count on an idle machine deserves a look.
 */
function lateLossNotices(sections: SectionRecord[]): number {
  let late = 0;
  for (const lost of sections.filter((s) => s.outcome === 'lost')) {
    const next = sections
      .filter((s) => s.key === lost.key && s.start > lost.start)
      .reduce<SectionRecord | undefined>((a, b) => (!a || b.start < a.start ? b : a), undefined);
    if (next && lost.end !== null && lost.end > next.start) late++;
  }
  return late;
}
