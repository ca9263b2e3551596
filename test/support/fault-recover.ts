import type * as Terminus from '@nestjs/terminus';
import type { MongoClient } from 'mongodb';
import type { LockService } from '../../lib';
import type * as HealthLibrary from '../../lib/health';
import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { RecoverArgs, RecoverReport } from './fault-protocol';

/** Pause between probe rounds that did not all pass. */
const ROUND_PAUSE_MS = 50;

/**
 * Probes a worker after an outage until everything works again in one round (see
 * `RecoverArgs`): the service takes and gives back a lock, the application client answers a
 * `ping`, and the library's health indicator says `up`.
 */
export async function probeUntilRecovered(
  service: LockService,
  client: MongoClient,
  shared: boolean,
  args: RecoverArgs,
  health: () => typeof HealthLibrary,
): Promise<RecoverReport> {
  // Loaded only here: the other scenarios' workers need no terminus.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { HealthIndicatorService } = require('@nestjs/terminus') as typeof Terminus;
  const indicator = new (health().MongoLockHealthIndicator)(service, new HealthIndicatorService());
  const report: RecoverReport = {
    lockAt: null,
    pingAt: null,
    healthAt: null,
    allAt: null,
    rounds: 0,
    lastErrors: [],
    shared,
  };
  const errors = new Map<string, string>();
  const note = (probe: string, error: unknown) =>
    errors.set(probe, error instanceof Error ? `${error.name}: ${error.message}` : String(error));
  while (report.allAt === null && sharedClockMs() < args.untilShared) {
    report.rounds++;
    const [lock, ping, up] = await Promise.all([
      lockProbe(service, args).then(
        () => true,
        (error: unknown) => (note('lock', error), false),
      ),
      bounded(client.db('admin').command({ ping: 1 }), args.probeTimeoutMs, 'ping').then(
        () => true,
        (error: unknown) => (note('ping', error), false),
      ),
      indicator.isHealthy('mongo-lock', { timeoutMs: args.probeTimeoutMs }).then(
        (result) => {
          const up = result['mongo-lock'].status === 'up';
          if (!up) note('health', new Error(JSON.stringify(result['mongo-lock'])));
          return up;
        },
        (error: unknown) => (note('health', error), false),
      ),
    ]);
    const now = sharedClockMs();
    if (lock) report.lockAt ??= now;
    if (ping) report.pingAt ??= now;
    if (up) report.healthAt ??= now;
    if (lock && ping && up) report.allAt = now;
    else await new Promise((resolve) => setTimeout(resolve, ROUND_PAUSE_MS));
  }
  report.lastErrors = [...errors].map(([probe, message]) => `${probe}: ${message}`);
  return report;
}

async function lockProbe(service: LockService, args: RecoverArgs): Promise<void> {
  const handle = await service.acquire(args.key, {
    ttlMs: 5_000,
    timeoutMs: args.probeTimeoutMs,
  });
  await handle.release();
}

/** `task`, or a rejection after `ms` (the driver's own wait may go on; it is not awaited). */
function bounded<T>(task: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  task.catch(() => undefined);
  return Promise.race([
    task,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
