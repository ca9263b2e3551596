import { MongoClient } from 'mongodb';
import { handlerRuns, startHostileApp, type HostileAdapter } from '../hostile/hostile-app';
import { hostileRequests, send, wellFormedRequest } from '../hostile/hostile-requests';
import { Expectations, type Scenario } from './scenario';

function hasLoneSurrogate(text: string): boolean {
  return /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text);
}

/**
 * Hostile input through key templates of `@Locked` handlers, on Express and Fastify: every
 * request gets a 4xx, no handler runs, nothing reaches the lock collection, no prototype is
 * polluted, and a well-formed request afterwards is served.
 */
export const hostileHttp: Scenario = {
  name: '7. hostile input through HTTP key templates',
  async run(server) {
    const expect = new Expectations();
    const client = new MongoClient(server.uri);
    let sent = 0;
    try {
      for (const adapter of ['express', 'fastify'] as HostileAdapter[]) {
        const dbName = `faults_hostile_${adapter}`;
        // Engine v2's collection (the default engine): a key's document keeps its line.
        const locks = client.db(dbName).collection<{ line?: unknown[] }>('locks_line');
        await locks.deleteMany({});
        const { app, port } = await startHostileApp(server.uri, dbName, adapter);
        try {
          handlerRuns.count = 0;
          let passedAsText = 0;
          for (const request of hostileRequests) {
            const status = await send(port, request);
            sent++;
            if (request.mayPassAsText && status >= 200 && status < 300) {
              passedAsText++;
              continue;
            }
            expect.that(
              status >= 400 && status < 500,
              `${adapter}: ${request.name}`,
              `answered ${status}, not a 4xx`,
            );
          }
          expect.that(
            handlerRuns.count === passedAsText,
            adapter,
            `${handlerRuns.count} handlers ran for hostile input`,
          );
          const written = await locks.find({}).toArray();
          expect.that(
            written.length === passedAsText,
            adapter,
            `lock documents written: ${JSON.stringify(written.map((d) => d._id))}`,
          );
          for (const doc of written) {
            const key = String(doc._id);
            expect.that(
              !hasLoneSurrogate(key),
              adapter,
              `ill-formed key stored: ${JSON.stringify(key)}`,
            );
            const inLine = doc.line?.length ?? 0;
            expect.that(inLine === 0, adapter, `lock ${JSON.stringify(key)} left held`);
          }
          expect.that(
            (Object.prototype as Record<string, unknown>).polluted === undefined,
            adapter,
            'Object.prototype was polluted',
          );
          const status = await send(port, wellFormedRequest);
          sent++;
          expect.that(status === 200, adapter, `well-formed request answered ${status} afterwards`);
          const released = await locks.findOne({ _id: 'q:order-42' as never });
          expect.that(
            released !== null && (released.line?.length ?? 0) === 0,
            adapter,
            'well-formed request left its lock held',
          );
        } finally {
          await app.close();
        }
        await client.db(dbName).dropDatabase();
      }
      return { operations: sent, violations: expect.violations, notes: 'Express and Fastify' };
    } finally {
      await client.close();
    }
  },
};
