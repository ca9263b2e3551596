import { Injectable } from '@nestjs/common';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import { LockServiceClosedError } from '../errors/lock-service-closed.error';
import { LockService } from '../lock.service';
import { integer, optionsObject } from '../option-checks';
import { formatMs } from '../util/durations';
import { MAX_TIMER_MS, settledBy } from '../util/timers';

/** The key the probe inspects: one read by `_id`, taking nothing. */
export const HEALTH_PROBE_KEY = 'nestjs-mongo-lock:health-probe';

/** Options of {@link MongoLockHealthIndicator.isHealthy}. */
export interface MongoLockHealthOptions {
  /**
   * How long the probe may take before the store counts as unreachable: an integer from 1 to
   * 2147483647 ms, else `isHealthy` rejects with `InvalidLockOptionsError`. Default 2 000 ms.
   */
  timeoutMs?: number;
}

/**
 * How the waiters' change stream stands: `established` while it is open, `idle` without one
 * (`changeStreams: 'off'`, a standalone server, or while it reopens). `opening` is not reported;
 * it stays in the type so that code matching on it still compiles.
 */
export type LockChangeStreamState = 'idle' | 'opening' | 'established';

/**
 * A `@nestjs/terminus` (v11+) health indicator: `up` when an `inspect` of a reserved key answers
 * within `timeoutMs`, else `down`. Both report the change stream's state, this instance's
 * waiters and held locks (`LockService.diagnostics`) and, per leadership it stands for,
 * `leader` or `follower` (`LockService.leading`).
 *
 * @example
 * \@Controller('health')
 * class HealthController {
 *   constructor(private health: HealthCheckService, private locks: MongoLockHealthIndicator) {}
 *
 *   \@Get() \@HealthCheck()
 *   check() {
 *     return this.health.check([() => this.locks.isHealthy('locks', { timeoutMs: 1_000 })]);
 *   }
 * }
 * // module: imports [TerminusModule], providers [MongoLockHealthIndicator]; LockService
 * // from the app's one MongoLockModule.forRoot({ ..., isGlobal: true })
 */
@Injectable()
export class MongoLockHealthIndicator {
  constructor(
    private readonly locks: LockService,
    private readonly health: HealthIndicatorService,
  ) {}

  async isHealthy<const Key extends string = 'mongo-lock'>(
    key: Key = 'mongo-lock' as Key,
    options: MongoLockHealthOptions = {},
  ): Promise<HealthIndicatorResult<Key>> {
    // Checked before the probe: a bad value is the caller's error, not the store being down.
    const given = optionsObject(options, ['timeoutMs']);
    const timeoutMs = integer('timeoutMs', given.timeoutMs, 1, MAX_TIMER_MS, 2_000);
    const indicator = this.health.check(key);
    const startedAt = performance.now();
    try {
      await settledBy(
        this.locks.inspect(HEALTH_PROBE_KEY),
        performance.now() + timeoutMs,
        undefined,
        () => new Error(`no answer from MongoDB within ${formatMs(timeoutMs)}`),
      );
    } catch (error) {
      return indicator.down({
        ...this.details(),
        // A service shutting down has not lost MongoDB: the probe just cannot be sent.
        store: error instanceof LockServiceClosedError ? 'closed' : 'unreachable',
        message: error instanceof Error ? error.message : String(error),
      });
    }
    return indicator.up({
      ...this.details(),
      store: 'reachable',
      responseTimeMs: Math.round(performance.now() - startedAt),
    });
  }

  private details() {
    const { streamOpen, waiters, held } = this.locks.diagnostics;
    const changeStream: LockChangeStreamState = streamOpen ? 'established' : 'idle';
    const leading = [...this.locks.leading];
    if (leading.length === 0) return { changeStream, waiters, held };
    const roles = leading.map(([name, leads]) => [name, leads ? 'leader' : 'follower'] as const);
    return { changeStream, waiters, held, leadership: Object.fromEntries(roles) };
  }
}
