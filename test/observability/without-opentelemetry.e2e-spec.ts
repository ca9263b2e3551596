import type * as LockServiceModule from '../../lib/lock.service';
import type * as TelemetryModule from '../../lib/telemetry';
import { LockTestKit } from '../lock-service/lock-test-kit';

jest.setTimeout(60_000);

describe('without @opentelemetry/api installed', () => {
  const kit = LockTestKit.forSuite();

  it('locks as usual, reporting nothing', async () => {
    let isolated!: typeof LockServiceModule;
    let telemetry!: typeof TelemetryModule;
    jest.isolateModules(() => {
      jest.doMock('@opentelemetry/api', () => {
        throw Object.assign(new Error("Cannot find module '@opentelemetry/api'"), {
          code: 'MODULE_NOT_FOUND',
        });
      });
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      isolated = require('../../lib/lock.service') as typeof LockServiceModule;
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      telemetry = require('../../lib/telemetry') as typeof TelemetryModule;
    });
    const locks = new isolated.LockService(kit.options());
    try {
      await locks.start();
      expect(locks.telemetry).toBe(telemetry.NOOP_LOCK_TELEMETRY);
      const result = await locks.withLock('jobs:1', (lock) => lock.key, {
        metricsLabel: 'jobs:{id}',
      });
      expect(result).toBe('jobs:1');
      const again = await locks.tryAcquire('jobs:1');
      expect(again).not.toBeNull();
      await again?.release();
    } finally {
      await locks.close();
      jest.dontMock('@opentelemetry/api');
    }
  });
});
