// The mongo suite (`--suite=mongo`): throughput and change-stream latency of the offline
// MongoDB test server over loopback, with the server in its own process; with MONGODB_URI set,
// of that server instead (for comparison), and BENCH_MONGO_SERVER_PID lets it read that
// server's CPU time. Prints the table and writes it, with the run's time and machine, to
// bench/results/mongo-latest.md. BENCH_MONGO_MS (per throughput row) and BENCH_MONGO_SAMPLES
// (change events) shorten it.
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { type Collection, MongoClient } from 'mongodb';
import { attemptAcquire } from '../../lib/store/acquire-attempt';
import type { LockChangeStream, LockCollection } from '../../lib/store/lock-document';
import { type LockChangeScope, openLockChangeStream } from '../../lib/store/lock-change-stream';
import { processCpuMicros, repoRoot } from '../support/bench-process';
import { describeMachine } from '../support/machine';
import type { SuiteContext } from '../support/suite';

const DURATION_MS = Number(process.env.BENCH_MONGO_MS ?? 3000);
const LATENCY_SAMPLES = Number(process.env.BENCH_MONGO_SAMPLES ?? 500);

interface Row {
  name: string;
  value: string;
}

interface Tally {
  done: number;
  seconds: number;
  /** CPU time of this process (the client) and of the server (0 when its pid is unknown), in µs. */
  clientMicros: number;
  serverMicros: number;
}

/** The server's pid: ours when we spawn it, else BENCH_MONGO_SERVER_PID if given. */
let serverPid: number | undefined;

function cpuNow(): { client: number; server: number | undefined } {
  const { user, system } = process.cpuUsage();
  return { client: user + system, server: processCpuMicros(serverPid) };
}

let serverCpuKnown = true;

/** Runs `operation` from `concurrency` loops for `ms` and counts completed operations. */
async function run(
  concurrency: number,
  ms: number,
  operation: (i: number) => Promise<unknown>,
): Promise<Tally> {
  const deadline = Date.now() + ms;
  let done = 0;
  const cpuBefore = cpuNow();
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
  const cpuAfter = cpuNow();
  if (cpuBefore.server === undefined || cpuAfter.server === undefined) serverCpuKnown = false;
  return {
    done,
    seconds,
    clientMicros: cpuAfter.client - cpuBefore.client,
    serverMicros: (cpuAfter.server ?? 0) - (cpuBefore.server ?? 0),
  };
}

/** Runs `operation` from `concurrency` loops for DURATION_MS and returns ops/s. */
async function throughput(
  concurrency: number,
  operation: (i: number) => Promise<unknown>,
): Promise<number> {
  const { done, seconds } = await run(concurrency, DURATION_MS, operation);
  return done / seconds;
}

interface Measured {
  rate: number;
  /** CPU µs per operation in this process and in the server. */
  clientPerOp: number;
  serverPerOp: number;
}

/**
 * Two operations measured in alternating slices (DURATION_MS each in total), so that both see
 * the same load on a shared machine: their rates (ops/s) and CPU per operation (µs, client
 * process plus server when known).
 */
async function interleaved(
  concurrency: number,
  first: (i: number) => Promise<unknown>,
  second: (i: number) => Promise<unknown>,
): Promise<Measured[]> {
  const slices = 6;
  const tallies: Tally[] = [
    { done: 0, seconds: 0, clientMicros: 0, serverMicros: 0 },
    { done: 0, seconds: 0, clientMicros: 0, serverMicros: 0 },
  ];
  for (let slice = 0; slice < slices; slice++) {
    for (const [index, operation] of [first, second].entries()) {
      const tally = await run(concurrency, DURATION_MS / slices, operation);
      tallies[index].done += tally.done;
      tallies[index].seconds += tally.seconds;
      tallies[index].clientMicros += tally.clientMicros;
      tallies[index].serverMicros += tally.serverMicros;
    }
  }
  return tallies.map(({ done, seconds, clientMicros, serverMicros }) => ({
    rate: done / seconds,
    clientPerOp: clientMicros / done,
    serverPerOp: serverMicros / done,
  }));
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

/**
 * The one change stream a library process reads (`ChangeFeed`): `releases` while it has
 * waiters, `ownership` (acquisitions too, with updateLookup) while someone reads `events$`.
 */
function openLibraryStream(
  collection: LockCollection,
  client: MongoClient,
  scope: LockChangeScope,
): () => Promise<void> {
  const stream: LockChangeStream = openLockChangeStream(collection, client, {
    scope,
    maxAwaitTimeMS: 1000,
  });
  let stopped = false;
  const reader = (async () => {
    while (!stopped && !stream.closed) await stream.tryNext().catch(() => null);
  })();
  return async () => {
    stopped = true;
    await stream.close();
    await reader;
  };
}

/**
 * The library's acquire attempt (`attemptAcquire`: upserting findOneAndUpdate with the
 * acquire pipeline and a computed projection, in a causally consistent session) on one key.
 * `held`: another owner holds a 60 s lease, so every attempt is a no-op that only reads;
 * `free`: ttlMs 0, so every attempt finds the lease ended, wins and writes, an event for the
 * `ownership` stream only. One stream of `scope` is open and read throughout.
 */
async function libraryAcquireVsPing(
  client: MongoClient,
  collection: LockCollection,
  mode: 'held' | 'free',
  scope: LockChangeScope,
  concurrency: number,
): Promise<Measured[]> {
  const key = `hot-${mode}-${scope}-${concurrency}`;
  if (mode === 'held') {
    await attemptAcquire(collection, client, { key, owner: 'holder', holder: 'h', ttlMs: 60_000 });
  }
  const admin = client.db('admin');
  const stopStream = openLibraryStream(collection, client, scope);
  try {
    return await interleaved(
      concurrency,
      (i) =>
        attemptAcquire(collection, client, {
          key,
          owner: `owner-${i}`,
          holder: `holder-${i % 4}`,
          ttlMs: mode === 'held' ? 30_000 : 0,
        }),
      () => admin.command({ ping: 1 }),
    );
  } finally {
    await stopStream();
  }
}

export async function runMongoSuite({
  server,
  command,
  startedAt,
}: SuiteContext): Promise<string[]> {
  const loadAtStart = describeMachine().loadAverage;
  serverPid =
    server.pid ??
    (process.env.BENCH_MONGO_SERVER_PID ? Number(process.env.BENCH_MONGO_SERVER_PID) : undefined);
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
    const libraryLocks = db.collection<any>('library_locks') as LockCollection;
    // A held key writes nothing, so its stream has nothing to read whatever its scope; a
    // free key's acquisition is an event only on the `ownership` stream.
    const cases = [
      { mode: 'held', scope: 'releases', label: 'held, no-op' },
      { mode: 'free', scope: 'releases', label: "free, write; waiters' stream" },
      { mode: 'free', scope: 'ownership', label: 'free, write + event; events$ stream' },
    ] as const;
    for (const { mode, scope, label } of cases) {
      for (const concurrency of [1, 8]) {
        const [acquire, ping] = await libraryAcquireVsPing(
          client,
          libraryLocks,
          mode,
          scope,
          concurrency,
        );
        rows.push({
          name: `library acquire hot doc (${label}), concurrency ${concurrency}`,
          value: `${acquire.rate.toFixed(0)} ops/s vs ping ${ping.rate.toFixed(0)} ops/s: ${(acquire.rate / ping.rate).toFixed(2)}×`,
        });
        const cpu = (m: Measured) => m.clientPerOp + m.serverPerOp;
        rows.push({
          name: `  CPU µs per op (client + server)`,
          value: serverCpuKnown
            ? `acquire ${acquire.clientPerOp.toFixed(0)} + ${acquire.serverPerOp.toFixed(0)}, ping ${ping.clientPerOp.toFixed(0)} + ${ping.serverPerOp.toFixed(0)}: ${(cpu(ping) / cpu(acquire)).toFixed(2)}×`
            : `acquire ${acquire.clientPerOp.toFixed(0)}, ping ${ping.clientPerOp.toFixed(0)} (client only; server pid unknown)`,
        });
      }
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
