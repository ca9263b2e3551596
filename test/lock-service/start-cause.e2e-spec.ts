// A start MongoDB cannot be reached for fails at `operationTimeoutMs`, before the driver's own
// server selection (30 s) gives up: the error names what the server monitor saw instead.
import { LockStoreUnavailableError } from '../../lib/errors';
import { LockService } from '../../lib/lock.service';
import { closedPort } from '../support/closed-port';
import { settleWithin } from './adversarial/kit';

jest.setTimeout(60_000);

describe('a start with nothing listening', () => {
  it("fails at its bound with the server monitor's reason, in message and cause", async () => {
    const port = await closedPort();
    const locks = new LockService({
      uri: `mongodb://127.0.0.1:${port}/?directConnection=true`,
      operationTimeoutMs: 1_000,
    });
    try {
      const started = await settleWithin(locks.start(), 10_000);
      expect(started.status).toBe('rejected');
      const error = started.error as Error;
      expect(error).toBeInstanceOf(LockStoreUnavailableError);
      expect(error.message).toMatch(/^LockService could not start: MongoDB did not answer within/);
      expect(error.message).toMatch(/the server monitor's last check failed: .*ECONNREFUSED/);
      expect((error.cause as Error).message).toMatch(/ECONNREFUSED/);
    } finally {
      await locks.close().catch(() => undefined);
    }
  });
});
