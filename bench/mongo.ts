// `npm run bench:mongo`: throughput and change-stream latency of the offline MongoDB test
// server over loopback, with the server in its own process. With MONGODB_URI set, measures
// that server instead (for comparison).
import { type Collection, MongoClient } from 'mongodb';
import { spawnOfflineMongo } from '../test/support/offline-mongo-process';

const DURATION_MS = Number(process.env.BENCH_MONGO_MS ?? 3000);
const LATENCY_SAMPLES = Number(process.env.BENCH_MONGO_SAMPLES ?? 500);

interface Row {
  name: string;
  value: string;
}

/** Runs `operation` from `concurrency` loops for DURATION_MS and returns ops/s. */
async function throughput(
  concurrency: number,
  operation: (i: number) => Promise<unknown>,
): Promise<number> {
  const deadline = Date.now() + DURATION_MS;
  let done = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < deadline) {
        await operation(done);
        done += 1;
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return done / seconds;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** A lock acquire as a pipeline update: take the lock if free or expired, bump the fence. */
function acquirePipeline(owner: string) {
  const free = {
    $or: [
      { $eq: [{ $type: '$owner' }, 'missing'] },
      { $lte: ['$expiresAt', '$$NOW'] },
      { $eq: ['$owner', owner] },
    ],
  };
  return [
    {
      $set: {
        fence: { $cond: [free, { $add: [{ $ifNull: ['$fence', 0] }, 1] }, '$fence'] },
        owner: { $cond: [free, owner, '$owner'] },
        expiresAt: { $cond: [free, { $add: ['$$NOW', 30_000] }, '$expiresAt'] },
      },
    },
  ];
}

async function changeEventLatency(collection: Collection<any>): Promise<number[]> {
  const stream = collection.watch([], { maxAwaitTimeMS: 5000 });
  const samples: number[] = [];
  // Open the cursor before the first write.
  await stream.tryNext();
  for (let i = 0; i < LATENCY_SAMPLES; i++) {
    const started = process.hrtime.bigint();
    await collection.insertOne({ i });
    await stream.next();
    samples.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  await stream.close();
  return samples.sort((a, b) => a - b);
}

async function main(): Promise<void> {
  const server = process.env.MONGODB_URI ? undefined : await spawnOfflineMongo();
  const uri = process.env.MONGODB_URI ?? server!.uri;
  const client = await MongoClient.connect(uri, { maxPoolSize: 20 });
  const db = client.db(`bench_${Date.now()}`);
  const rows: Row[] = [];
  try {
    const inserts = db.collection<any>('inserts');
    for (const concurrency of [1, 8]) {
      const rate = await throughput(concurrency, () =>
        inserts.insertOne({ at: new Date(), payload: 'x'.repeat(100) }),
      );
      rows.push({
        name: `insertOne, concurrency ${concurrency}`,
        value: `${rate.toFixed(0)} ops/s`,
      });
    }
    const locks = db.collection<any>('locks');
    for (const concurrency of [1, 8]) {
      const rate = await throughput(concurrency, (i) =>
        locks.findOneAndUpdate({ _id: 'hot' }, acquirePipeline(`owner-${i % 4}`), {
          upsert: true,
          returnDocument: 'after',
        }),
      );
      rows.push({
        name: `findOneAndUpdate hot doc (pipeline), concurrency ${concurrency}`,
        value: `${rate.toFixed(0)} ops/s`,
      });
    }
    const latency = await changeEventLatency(db.collection<any>('events'));
    rows.push({
      name: `write -> change event p50 (${LATENCY_SAMPLES} samples)`,
      value: `${percentile(latency, 50).toFixed(2)} ms`,
    });
    rows.push({
      name: `write -> change event p99 (${LATENCY_SAMPLES} samples)`,
      value: `${percentile(latency, 99).toFixed(2)} ms`,
    });
    await db.dropDatabase();
  } finally {
    await client.close();
    await server?.stop();
  }
  const target = server ? 'offline test server (own process)' : 'MONGODB_URI';
  const width = Math.max(...rows.map((row) => row.name.length));
  console.log(
    `MongoDB bench against ${target}, node ${process.version}, ${DURATION_MS} ms per throughput row`,
  );
  console.log(`| ${'measure'.padEnd(width)} | result |`);
  console.log(`| ${'-'.repeat(width)} | ------ |`);
  for (const row of rows) console.log(`| ${row.name.padEnd(width)} | ${row.value} |`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
