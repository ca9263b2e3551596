// The documents suite (`--suite=documents`): a read-modify-write of one document
// under a document lock (`documents().acquire()`, then `commit()`: one lock-and-read round
// trip, one write-and-unlock round trip) against the same work under a lock-collection lock
// (`withLock` around a `findOne` and an `updateOne`), in the same run, on the same server:
// uncontended, P workers on distinct documents, P workers on one document. Commands are
// counted on the wire (monitorCommands), latencies are per operation. Writes
// bench/results/document-lock.json and prints a Markdown table. BENCH_DOC_MS (measured time
// per variant and scenario) and BENCH_DOC_WORKERS shorten or widen it.
import { writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { MongoClient } from 'mongodb';
import type { Collection, CommandStartedEvent } from 'mongodb';
import type { DocumentLocks } from '../../lib/documents/document-locks';
import { LockService } from '../../lib/lock.service';
import { repoRoot, uriWithDatabase } from '../support/bench-process';
import { describeMachine } from '../support/machine';
import { round, summarize, type LatencySummary } from '../support/stats';
import type { SuiteContext } from '../support/suite';

const settings = {
  /** Concurrent workers (each its own LockService and client, as separate processes would be). */
  workers: Number(process.env.BENCH_DOC_WORKERS ?? 4),
  /** Measured time per variant and scenario, split into alternating slices. */
  durationMs: Number(process.env.BENCH_DOC_MS ?? 6000),
  slices: 6,
  warmupOps: 20,
  ttlMs: 30_000,
  waitTimeoutMs: 30_000,
};

type VariantName = 'document-lock' | 'lock-collection';

const variantLabels: Record<VariantName, string> = {
  'document-lock': 'document lock: acquire (returns doc) + commit',
  'lock-collection': 'lock collection: withLock + findOne + updateOne',
};

interface Account {
  _id: string;
  balance: number;
}

/** One worker of one variant: its own service and monitored client. */
interface Worker {
  client: MongoClient;
  service: LockService;
  documents: DocumentLocks<Account>;
  accounts: Collection<Account>;
}

/** What one operation cost: total time, and the part until the lock (and document) was ours. */
interface Sample {
  totalMs: number;
  acquireMs: number;
}

interface Tally {
  ops: number;
  seconds: number;
  commands: Record<string, number>;
  samples: Sample[];
}

interface ScenarioResult {
  scenario: string;
  variant: VariantName;
  ops: number;
  opsPerSecond: number;
  commandsPerOp: number;
  commandsPerOpByName: Record<string, number>;
  latency: LatencySummary;
  acquireLatency: LatencySummary;
}

/** Commands counted, by name, for the variant whose slice is running. */
const counting: { active: VariantName | undefined; commands: Record<string, number> } = {
  active: undefined,
  commands: {},
};

async function startWorker(uri: string, dbName: string, variant: VariantName): Promise<Worker> {
  const client = new MongoClient(uriWithDatabase(uri, dbName), { monitorCommands: true });
  client.on('commandStarted', (event: CommandStartedEvent) => {
    if (counting.active !== variant) return;
    if (['hello', 'isMaster', 'ismaster', 'ping'].includes(event.commandName)) return;
    counting.commands[event.commandName] = (counting.commands[event.commandName] ?? 0) + 1;
  });
  await client.connect();
  const service = new LockService({ client, dbName, collectionName: 'locks' });
  await service.start();
  return {
    client,
    service,
    documents: service.documents<Account>('accounts'),
    accounts: client.db(dbName).collection<Account>('accounts'),
  };
}

/**
 * One read-modify-write of `id`: the new balance is computed from the document read under
 * the lock, so the final balances check that the lock excluded every other writer.
 */
const operations: Record<VariantName, (worker: Worker, id: string) => Promise<Sample>> = {
  async 'document-lock'(worker, id) {
    const started = performance.now();
    const lock = await worker.documents.acquire(id, {
      ttlMs: settings.ttlMs,
      timeoutMs: settings.waitTimeoutMs,
    });
    const acquiredAt = performance.now();
    await lock.commit({ $set: { balance: lock.doc.balance + 1 } });
    return { totalMs: performance.now() - started, acquireMs: acquiredAt - started };
  },
  async 'lock-collection'(worker, id) {
    const started = performance.now();
    let acquiredAt = started;
    await worker.service.withLock(
      `accounts:${id}`,
      async () => {
        const doc = await worker.accounts.findOne({ _id: id });
        acquiredAt = performance.now();
        if (!doc) throw new Error(`no document ${id}`);
        await worker.accounts.updateOne({ _id: id }, { $set: { balance: doc.balance + 1 } });
      },
      { ttlMs: settings.ttlMs, timeoutMs: settings.waitTimeoutMs, renew: false },
    );
    return { totalMs: performance.now() - started, acquireMs: acquiredAt - started };
  },
};

/** `workers` loop on `operation` for `ms`, each on the document `idOf(worker index)`. */
async function runSlice(
  variant: VariantName,
  workers: Worker[],
  idOf: (index: number) => string,
  ms: number,
  tally: Tally,
): Promise<void> {
  const operation = operations[variant];
  counting.active = variant;
  counting.commands = {};
  const deadline = performance.now() + ms;
  const started = performance.now();
  await Promise.all(
    workers.map(async (worker, index) => {
      while (performance.now() < deadline) {
        tally.samples.push(await operation(worker, idOf(index)));
        tally.ops += 1;
      }
    }),
  );
  tally.seconds += (performance.now() - started) / 1000;
  counting.active = undefined;
  for (const [name, n] of Object.entries(counting.commands)) {
    tally.commands[name] = (tally.commands[name] ?? 0) + n;
  }
}

async function runScenario(
  scenario: string,
  pool: Record<VariantName, Worker[]>,
  concurrency: number,
  idOf: (index: number) => string,
  log: (message: string) => void,
): Promise<ScenarioResult[]> {
  const variants = Object.keys(pool) as VariantName[];
  const tallies = new Map<VariantName, Tally>(
    variants.map((variant) => [variant, { ops: 0, seconds: 0, commands: {}, samples: [] }]),
  );
  for (const variant of variants) {
    const workers = pool[variant].slice(0, concurrency);
    await Promise.all(
      workers.map(async (worker, index) => {
        for (let i = 0; i < settings.warmupOps; i++) await operations[variant](worker, idOf(index));
      }),
    );
  }
  // Alternating slices (A B, B A, ...) so that both variants see the same machine load.
  for (let slice = 0; slice < settings.slices; slice++) {
    const order = slice % 2 === 0 ? variants : [...variants].reverse();
    for (const variant of order) {
      await runSlice(
        variant,
        pool[variant].slice(0, concurrency),
        idOf,
        settings.durationMs / settings.slices,
        tallies.get(variant)!,
      );
    }
  }
  return variants.map((variant) => {
    const tally = tallies.get(variant)!;
    const total = Object.values(tally.commands).reduce((sum, n) => sum + n, 0);
    const byName = Object.fromEntries(
      Object.entries(tally.commands)
        .sort(([, a], [, b]) => b - a)
        .map(([name, n]) => [name, round(n / tally.ops, 2)]),
    );
    const result: ScenarioResult = {
      scenario,
      variant,
      ops: tally.ops,
      opsPerSecond: round(tally.ops / tally.seconds, 1),
      commandsPerOp: round(total / tally.ops, 2),
      commandsPerOpByName: byName,
      latency: roundSummary(summarize(tally.samples.map((s) => s.totalMs))),
      acquireLatency: roundSummary(summarize(tally.samples.map((s) => s.acquireMs))),
    };
    log(
      `${scenario}, ${variant}: ${result.ops} ops, ${result.opsPerSecond}/s, ` +
        `${result.commandsPerOp} commands/op, p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms`,
    );
    return result;
  });
}

function roundSummary(summary: LatencySummary): LatencySummary {
  return Object.fromEntries(
    Object.entries(summary).map(([name, value]) => [name, round(value, 3)]),
  ) as unknown as LatencySummary;
}

async function measurePing(client: MongoClient, samples: number): Promise<LatencySummary> {
  const admin = client.db('admin');
  const times: number[] = [];
  for (let i = 0; i < samples; i++) {
    const started = performance.now();
    await admin.command({ ping: 1 });
    times.push(performance.now() - started);
  }
  return roundSummary(summarize(times));
}

/** Every operation added 1 to the balance it read under the lock: a lost update shows here. */
async function checkBalances(pool: Record<VariantName, Worker[]>): Promise<string[]> {
  const problems: string[] = [];
  for (const [variant, workers] of Object.entries(pool)) {
    const docs = await workers[0].accounts.find({}).toArray();
    for (const doc of docs) {
      const expected = expectedBalance.get(`${variant}/${doc._id}`) ?? 0;
      if (doc.balance !== expected) {
        problems.push(`${variant} ${doc._id}: balance ${doc.balance}, expected ${expected}`);
      }
    }
  }
  return problems;
}

const expectedBalance = new Map<string, number>();

/** Wraps every operation so that the expected final balance of each document is known. */
function countOperations(): void {
  for (const variant of Object.keys(operations) as VariantName[]) {
    const inner = operations[variant];
    operations[variant] = async (worker, id) => {
      const sample = await inner(worker, id);
      const key = `${variant}/${id}`;
      expectedBalance.set(key, (expectedBalance.get(key) ?? 0) + 1);
      return sample;
    };
  }
}

function markdown(results: ScenarioResult[], ping: LatencySummary): string {
  const lines = [
    '| scenario | variant | ops/s | commands / op | p50 ms | p90 ms | p99 ms | p50 / ping | until locked + read, p50 / p99 ms |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const r of results) {
    const breakdown = Object.entries(r.commandsPerOpByName)
      .map(([name, n]) => `${name} ${n}`)
      .join(', ');
    lines.push(
      `| ${r.scenario} | ${variantLabels[r.variant]} | ${r.opsPerSecond} | ${r.commandsPerOp} (${breakdown}) | ` +
        `${r.latency.p50.toFixed(2)} | ${r.latency.p90.toFixed(2)} | ${r.latency.p99.toFixed(2)} | ` +
        `${round(r.latency.p50 / ping.p50, 2)} | ${r.acquireLatency.p50.toFixed(2)} / ${r.acquireLatency.p99.toFixed(2)} |`,
    );
  }
  return lines.join('\n');
}

export async function runDocumentsSuite({
  server,
  command,
  startedAt,
  log,
}: SuiteContext): Promise<string[]> {
  const dbName = `bench_doclock_${Date.now()}`;
  const variants = Object.keys(variantLabels) as VariantName[];
  const pool = {} as Record<VariantName, Worker[]>;
  const reference = new MongoClient(server.uri);
  try {
    await reference.connect();
    for (const variant of variants) {
      const variantDb = `${dbName}_${variant.replace(/\W/g, '_')}`;
      pool[variant] = [];
      for (let i = 0; i < settings.workers; i++) {
        pool[variant].push(await startWorker(server.uri, variantDb, variant));
      }
      const ids = ['solo', 'hot', ...pool[variant].map((_, i) => `own-${i}`)];
      await pool[variant][0].accounts.insertMany(ids.map((_id) => ({ _id, balance: 0 })));
    }
    countOperations();
    const ping = await measurePing(reference, 300);
    log(`ping p50 ${ping.p50} ms, p99 ${ping.p99} ms`);
    const results = [
      ...(await runScenario('uncontended (1 worker)', pool, 1, () => 'solo', log)),
      ...(await runScenario(
        `${settings.workers} workers, distinct documents`,
        pool,
        settings.workers,
        (i) => `own-${i}`,
        log,
      )),
      ...(await runScenario(
        `${settings.workers} workers, one document`,
        pool,
        settings.workers,
        () => 'hot',
        log,
      )),
    ];
    const pingAtEnd = await measurePing(reference, 300);
    const problems = await checkBalances(pool);
    if (problems.length) log(`LOST UPDATES: ${problems.join('; ')}`);
    else log('balances check: every read-modify-write landed, none lost');
    const report = {
      command,
      startedAt: startedAt.toISOString(),
      durationMs: Date.now() - startedAt.getTime(),
      machine: describeMachine(),
      server: server.kind,
      settings,
      ping,
      pingAtEnd,
      results,
      balanceProblems: problems,
    };
    const file = path.join(repoRoot, 'bench/results/document-lock.json');
    writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
    const machine = report.machine;
    console.log(
      `Document lock vs lock collection, ${server.kind} server, ${machine.cpuCount} × ${machine.cpuModel}, ` +
        `node ${machine.node}, load ${machine.loadAverage.join(' / ')}; ` +
        `ping p50 ${ping.p50} ms before, ${pingAtEnd.p50} ms after; ` +
        `${settings.durationMs} ms per variant and scenario in ${settings.slices} alternating slices\n`,
    );
    console.log(markdown(results, ping));
    return problems;
  } finally {
    for (const workers of Object.values(pool)) {
      for (const worker of workers) {
        await worker.service.close().catch(() => undefined);
        await worker.client.close().catch(() => undefined);
      }
    }
    await reference.close();
  }
}
