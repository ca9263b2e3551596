import { MongoClient } from 'mongodb';
import { canEmulate, startTestMongo } from '../test-mongo';

describe('test fixture (test-mongo.ts)', () => {
  it('gives a reachable server and a unique database name per call', async () => {
    const first = await startTestMongo();
    const second = await startTestMongo();
    try {
      expect(first.dbName).toMatch(/^test_[0-9a-f]+$/);
      expect(first.dbName).not.toBe(second.dbName);
      expect(['uri', 'memory-server', 'offline']).toContain(first.kind);
      const client = await MongoClient.connect(first.uri);
      expect(await client.db(first.dbName).command({ ping: 1 })).toMatchObject({ ok: 1 });
      await client.close();
    } finally {
      await first.stop();
      await second.stop();
    }
  });

  (canEmulate('standalone') ? it : it.skip)(
    'emulates a standalone on the offline server',
    async () => {
      const mongo = await startTestMongo({ standalone: true });
      try {
        expect(mongo.kind).toBe('offline');
        expect(mongo.uri).toContain('directConnection=true');
        const client = await MongoClient.connect(mongo.uri);
        const hello = await client.db('admin').command({ hello: 1 });
        expect(hello.setName).toBeUndefined();
        await client.close();
      } finally {
        await mongo.stop();
      }
    },
  );

  (canEmulate('ttlMonitorSleepSecs') ? it : it.skip)(
    'passes ttlMonitorSleepSecs to the offline server',
    async () => {
      const mongo = await startTestMongo({ ttlMonitorSleepSecs: 7 });
      try {
        const client = await MongoClient.connect(mongo.uri);
        expect(
          await client.db('admin').command({ getParameter: 1, ttlMonitorSleepSecs: 1 }),
        ).toMatchObject({ ttlMonitorSleepSecs: 7 });
        await client.close();
      } finally {
        await mongo.stop();
      }
    },
  );
});
