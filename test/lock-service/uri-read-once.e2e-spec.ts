// The driver reads a connection string only as it makes a client, and warns of a deprecated
// option each time it reads one: the service connects with the client the check of `uri` made,
// and every start of the service (one failed for MongoDB's absence is tried again) reuses it.
import { LockStoreUnavailableError } from '../../lib/errors';
import { LockService } from '../../lib/lock.service';
import { closedPort } from '../support/closed-port';
import { LockTestKit } from './lock-test-kit';

jest.setTimeout(30_000);

/** The driver warns "wtimeout is a deprecated option: Please use wtimeoutMS instead". */
const DEPRECATED_OPTION = 'wtimeout=5000';

const withDeprecatedOption = (uri: string) =>
  `${uri}${uri.includes('?') ? '&' : '?'}${DEPRECATED_OPTION}`;

describe('a uri with an option the driver warns of', () => {
  const kit = LockTestKit.forSuite();
  let warnings: string[];
  let emitWarning: jest.SpiedFunction<typeof process.emitWarning>;

  beforeEach(() => {
    warnings = [];
    emitWarning = jest.spyOn(process, 'emitWarning').mockImplementation((warning) => {
      warnings.push(String(warning));
    });
  });
  afterEach(() => emitWarning.mockRestore());

  const wtimeoutWarnings = () =>
    warnings.filter((warning) => /wtimeout is a deprecated/.test(warning));

  it('is warned of once: the service connects with the client its check made', async () => {
    const locks = await kit.service({ uri: withDeprecatedOption(kit.mongo.uri) });
    const handle = await locks.acquire('read-once');
    await handle.release();
    expect(wtimeoutWarnings()).toHaveLength(1);
  });

  it('is warned of once over starts that MongoDB’s absence failed', async () => {
    const port = await closedPort();
    const locks = new LockService({
      uri: withDeprecatedOption(`mongodb://127.0.0.1:${port}/?directConnection=true`),
      operationTimeoutMs: 100,
    });
    try {
      await expect(locks.start()).rejects.toBeInstanceOf(LockStoreUnavailableError);
      await expect(locks.start()).rejects.toBeInstanceOf(LockStoreUnavailableError);
      expect(wtimeoutWarnings()).toHaveLength(1);
    } finally {
      await locks.close();
    }
  });
});
