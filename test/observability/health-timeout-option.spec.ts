import { HealthIndicatorService } from '@nestjs/terminus';
import type { LockService } from '../../lib';
import { InvalidLockOptionsError } from '../../lib/errors';
import { MongoLockHealthIndicator } from '../../lib/health';

// Checked before the probe starts: the service is never asked (see health-indicator.e2e-spec
// for probes against MongoDB).
const untouched = new Proxy({} as LockService, {
  get: () => {
    throw new Error('the probe ran');
  },
});

describe('MongoLockHealthIndicator timeoutMs', () => {
  it.each([NaN, -1, 0, 1.5, Infinity, 2 ** 31, '1000'])(
    'refuses %p with InvalidLockOptionsError rather than a probe that cannot time out right',
    async (timeoutMs) => {
      const indicator = new MongoLockHealthIndicator(untouched, new HealthIndicatorService());
      const probing = indicator.isHealthy('locks', { timeoutMs: timeoutMs as number });
      await expect(probing).rejects.toThrow(InvalidLockOptionsError);
      await expect(probing).rejects.toThrow(/timeoutMs must be an integer from 1 to 2147483647/);
    },
  );
});

describe('MongoLockHealthIndicator options', () => {
  it('takes null options as none: the probe runs with the default timeout', async () => {
    const indicator = new MongoLockHealthIndicator(untouched, new HealthIndicatorService());
    await expect(indicator.isHealthy('locks', null as never)).rejects.toThrow('the probe ran');
  });

  it('refuses an unknown option rather than probing with the default timeout', async () => {
    const indicator = new MongoLockHealthIndicator(untouched, new HealthIndicatorService());
    const probing = indicator.isHealthy('locks', { timeout: 5 } as never);
    await expect(probing).rejects.toThrow(InvalidLockOptionsError);
    await expect(probing).rejects.toThrow(/timeout is not an option \(did you mean timeoutMs\?\)/);
  });
});
