import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { ContendStats } from '../../support/fault-protocol';
import type { FaultServer } from '../../support/fault-server';
import { FaultRun } from '../harness/fault-run';
import type { Violation } from '../history/history';
import { Expectations, type Scenario, type ScenarioOutcome } from './scenario';

const processes = 3;
const workersPerProcess = 3;
const ttlMs = 1000;
const durationMs = 7000;
/**
 * Waiters on change streams sleep until the lease ends by their own countdown, so they rarely
 * ask inside the last few hundred ms of a lease; pollers ask every 50-100 ms, at any point of
 * it. All but the last process poll, so an early grant has many chances to show.
 */
const polling = { changeStreams: 'off', pollIntervalMs: 25, maxPollIntervalMs: 100 };

/**
 * Contention at the edge of the lease: 3 processes × 3 workers on 2 keys, no renewal, and half
 * of the holds from 85 % to 130 % of the lease, so that leases run out under their holders
 * while others wait and poll. A library that grants a key before its lease
 * has ended hands it over inside the old holder's protected interval (overlap), or before the
 * old holder was told (told-late). The mutation test runs this on a library broken that way
 * (`libDir`) and expects violations; the suite runs it on the real library and expects none.
 */
export async function runEarlyGrantProbe(
  server: FaultServer,
  libDir?: string,
): Promise<ScenarioOutcome> {
  const run = new FaultRun(server, 'edge');
  const expect = new Expectations();
  try {
    const workers = await run.spawn(
      Array.from({ length: processes }, (_, i) => ({
        label: `edge${i}`,
        libDir,
        options: i < processes - 1 ? polling : undefined,
      })),
    );
    const stopAt = sharedClockMs() + durationMs;
    const stats: ContendStats[] = await Promise.all(
      workers.map((w) =>
        w.process.call('contend', {
          keys: ['edge:a', 'edge:b'],
          workers: workersPerProcess,
          ttlMs,
          timeoutMs: 20_000,
          hold: { shortMaxMs: 30, longShare: 0.5, longMinMs: ttlMs * 0.85, longMaxMs: ttlMs * 1.3 },
          renewShare: 0,
          stopAt,
          maxSections: 500,
        }),
      ),
    );
    const sections = stats.reduce((sum, s) => sum + s.sections, 0);
    const lost = stats.reduce((sum, s) => sum + s.lost, 0);
    const errors = stats.flatMap((s) => s.errors);
    expect.that(errors.length === 0, '*', `workers failed: ${errors.join('; ')}`);
    expect.that(
      run.history.sections.length === sections,
      '*',
      `${sections} sections counted, ${run.history.sections.length} reported`,
    );
    expect.that(lost > 0, '*', 'no lease ran out under its holder: the probe probed nothing');
    const violations = await run.check({ leaseMs: ttlMs }, expect.violations);
    return {
      operations: sections,
      violations,
      notes: `${lost} of ${sections} sections lost their lease; violations: ${countByKind(violations)}`,
    };
  } finally {
    await run.stop();
  }
}

function countByKind(violations: Violation[]): string {
  const counts = new Map<string, number>();
  for (const v of violations) counts.set(v.kind, (counts.get(v.kind) ?? 0) + 1);
  return counts.size === 0
    ? 'none'
    : [...counts].map(([kind, count]) => `${count} ${kind}`).join(', ');
}

/** The probe on the library under test: what the mutation test breaks must hold here. */
export const earlyGrantProbe: Scenario = {
  name: 'early-grant probe: 3 processes x 3 workers at the lease edge (real library)',
  run: (server) => runEarlyGrantProbe(server),
};
