// The mongo suite (`--suite=mongo`): throughput and change-stream latency of the offline
// MongoDB test server over loopback, with the server in its own process; with MONGODB_URI set,
// of that server instead (for comparison). Prints the table and writes it, with the run's time and machine, to
// bench/results/mongo-latest.md. BENCH_MONGO_MS (per throughput row) and BENCH_MONGO_SAMPLES
// (change events) shorten it.
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { type Collection, MongoClient } from 'mongodb';
import { repoRoot } from '../support/bench-process';
import { describeMachine } from '../support/machine';
import type { SuiteContext } from '../support/suite';

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
  return done / (Number(process.hrtime.bigint() - started) / 1e9);
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

export async function runMongoSuite({
  server,
  command,
  startedAt,
}: SuiteContext): Promise<string[]> {
  const loadAtStart = describeMachine().loadAverage;
  const client = await MongoClient.connect(server.uri, { maxPoolSize: 20 });
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
    const admin = client.db('admin');
    for (const concurrency of [1, 8]) {
      const rate = await throughput(concurrency, () => admin.command({ ping: 1 }));
      rows.push({ name: `ping, concurrency ${concurrency}`, value: `${rate.toFixed(0)} ops/s` });
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
  }
  const target = server.kind === 'offline' ? 'offline test server (own process)' : 'MONGODB_URI';
  const machine = describeMachine();
  const width = Math.max(...rows.map((row) => row.name.length));
  const markdown = [
    `# The MongoDB server under the library (\`${command}\`)`,
    '',
    `Run ${startedAt.toISOString()}, ${Math.round((Date.now() - startedAt.getTime()) / 1000)} s, against the ${target}. ` +
      `${machine.cpuCount} × ${machine.cpuModel}, load average ${loadAtStart.join(' / ')} at the start, ` +
      `${machine.loadAverage.join(' / ')} at the end; Node.js ${machine.node}; ${DURATION_MS} ms per throughput row.`,
    '',
    `| ${'measure'.padEnd(width)} | result |`,
    `| ${'-'.repeat(width)} | ------ |`,
    ...rows.map((row) => `| ${row.name.padEnd(width)} | ${row.value} |`),
    '',
  ].join('\n');
  const dir = path.join(repoRoot, 'bench/results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'mongo-latest.md'), markdown);
  process.stdout.write(markdown);
  return [];
}
