// Upgrading from 0.1 (docs/upgrading.md): this version keeps key locks in `<collectionName>_line`
// and never reads 0.1's `<collectionName>`, so a 0.1 process still running excludes nobody here.
// A service warns at its start when it finds a live 0.1 lock there.
import { Logger } from '@nestjs/common';
import { Long } from 'mongodb';
import { describeWithFailPoints, faultTools } from './adversarial/kit';
import { eventually, LockTestKit } from './lock-test-kit';

jest.setTimeout(30_000);

describe('0.1 locks at start', () => {
  const kit = LockTestKit.forSuite();
  let warn: jest.SpyInstance;

  beforeEach(() => {
    kit.nextCollection();
    warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });
  afterEach(() => warn.mockRestore());

  /** 0.1's collection, with the lock documents given (0.1.0 had exclusive locks only). */
  async function v1Locks(docs: Record<string, unknown>[]): Promise<void> {
    const client = await kit.client();
    await client.db(kit.mongo.dbName).collection(kit.collectionName).insertMany(docs);
  }
  const inMs = (ms: number) => new Date(Date.now() + ms);
  const v1Warnings = () =>
    warn.mock.calls.map(([message]) => String(message)).filter((m) => m.includes('0.1 process'));

  it('warns of a lease held by 0.1 in <collectionName>', async () => {
    await v1Locks([
      { _id: 'old:free', fence: Long.fromNumber(3), owner: null, expiresAt: inMs(-60_000) },
      { _id: 'old:held', fence: Long.fromNumber(7), owner: 't1', expiresAt: inMs(60_000) },
    ]);
    await kit.service();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(v1Warnings()).toEqual([expect.stringContaining('Lock "old:held" is held by a 0.1')]);
    expect(v1Warnings()[0]).toContain(`"${kit.collectionName}"`);
  });

  it('says nothing when 0.1 locks there have ended or were released, or of other documents', async () => {
    await v1Locks([
      { _id: 'old:free', fence: Long.fromNumber(3), owner: null, expiresAt: inMs(-60_000) },
      { _id: 'old:ended', fence: Long.fromNumber(4), owner: 't1', expiresAt: inMs(-1) },
      // 0.1's release clears the owner and leaves the lease end as it was.
      { _id: 'old:released', fence: Long.fromNumber(5), owner: null, expiresAt: inMs(60_000) },
      // Not a lock document of 0.1 (no fence): an application's own collection of that name.
      { _id: 'session', expiresAt: inMs(60_000) },
    ]);
    await kit.service();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(v1Warnings()).toEqual([]);
  });

  describeWithFailPoints('with a slow server', () => {
    const { failPoint, appClient } = faultTools(kit);

    it('the read neither holds nor fails the start: its warning comes when answered', async () => {
      await v1Locks([
        { _id: 'old:held', fence: Long.fromNumber(7), owner: 't1', expiresAt: inMs(60_000) },
      ]);
      const client = await appClient('v1-slow-find');
      await failPoint(
        { times: 1 },
        {
          failCommands: ['find'],
          appName: 'v1-slow-find',
          blockConnection: true,
          blockTimeMS: 3_000,
        },
      );
      const locks = await kit.service({ client });
      // Started, and usable, while MongoDB still holds the read.
      await (await locks.acquire('k')).release();
      expect(v1Warnings()).toEqual([]);
      await eventually(() => v1Warnings().length === 1, 10_000);
    });
  });
});
