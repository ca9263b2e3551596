// A worker's operations for the compared lock libraries (`startVariants`): every variant
// connected at once, one driven at a time (`use`), by the main and contention suites.
import { MongoClient, type ChangeStream, type CommandStartedEvent } from 'mongodb';
import { sharedClockMs } from '../../packages/process-harness/clock';
import type { BenchLock, HeldBenchLock, VariantName } from '../adapters/bench-lock';
import { createMongodashLock } from '../adapters/mongodash';
import { createOurLock } from '../adapters/ours';
import { uriWithDatabase } from '../support/bench-process';
import { sleep } from '../support/stats';
import type { CommandCounts, WorkerHandlers } from '../worker-protocol';

/** The variant later calls drive (`use`): its lock, and the only client whose commands count. */
let activeVariant: VariantName | undefined;
const locks = new Map<VariantName, { lock: BenchLock; client: MongoClient }>();
let client: MongoClient | undefined;
const held = new Map<string, HeldBenchLock>();
const waiting = new Map<string, Promise<number>>();
/** Commands the variant in use sent, by name, since the last reset (monitorCommands). */
let commandsSent: Record<string, number> = {};
/** The change-event floor's stream (watcher side), and when its awaited event arrived. */
let relayStream: ChangeStream | undefined;
let relayArrived: Promise<number> | undefined;

/** One document the floor's writer updates and its watcher hears of, outside every variant's database. */
function relayCollection() {
  return client!.db('bench_event_floor').collection<{ _id: string; n: number }>('relay');
}

function requireLock(): BenchLock {
  const active = activeVariant && locks.get(activeVariant);
  if (!active) throw new Error('worker not started');
  return active.lock;
}

/** Runs `action` at shared-clock time `at`; synchronously if that has passed. */
async function atSharedClock(at: number, action: () => void): Promise<void> {
  const wait = at - sharedClockMs();
  if (wait > 0) await sleep(wait);
  action();
}

/** Counts the commands of `variant`'s client while it is the one in use. */
function commandCounter(variant: VariantName) {
  return (event: CommandStartedEvent): void => {
    if (variant !== activeVariant) return;
    const vars = Object.keys((event.command as { let?: object }).let ?? {});
    const kind =
      event.commandName !== 'findAndModify'
        ? ''
        : vars.includes('h')
          ? ':join'
          : vars.includes('d')
            ? ':renew'
            : ':leave';
    const name = event.commandName + kind;
    commandsSent[name] = (commandsSent[name] ?? 0) + 1;
  };
}

async function acquireAndRecord(key: string, timeoutMs: number): Promise<number> {
  const handle = await requireLock().acquire(key, timeoutMs);
  const at = sharedClockMs();
  held.set(key, handle);
  return at;
}

export const variantLockOps: WorkerHandlers<
  | 'startVariants'
  | 'use'
  | 'hold'
  | 'startWaiting'
  | 'awaitAcquired'
  | 'release'
  | 'contend'
  | 'ping'
  | 'watchRelay'
  | 'relayWrite'
  | 'awaitRelay'
  | 'countCommands'
> = {
  async startVariants({ variants, uri, dbName }) {
    // One monitored client per variant: round trips are counted on the wire, not guessed,
    // and each library has its own connections and database.
    for (const variant of variants) {
      const variantDb = `${dbName}_${variant.replace(/\W/g, '_')}`;
      const variantClient = new MongoClient(uriWithDatabase(uri, variantDb), {
        monitorCommands: true,
      });
      variantClient.on('commandStarted', commandCounter(variant));
      await variantClient.connect();
      const variantLock =
        variant === 'mongodash'
          ? await createMongodashLock({
              uri: uriWithDatabase(uri, variantDb),
              client: variantClient,
            })
          : await createOurLock(variant, { uri, dbName: variantDb, client: variantClient });
      locks.set(variant, { lock: variantLock, client: variantClient });
    }
    if (!client) {
      client = new MongoClient(uri);
      await client.connect();
    }
    return { pid: process.pid };
  },

  async use({ variant }) {
    if (!locks.has(variant)) throw new Error(`variant ${variant} not started`);
    activeVariant = variant;
    return { variant };
  },

  async hold({ key, timeoutMs }) {
    return { at: await acquireAndRecord(key, timeoutMs) };
  },

  async startWaiting({ key, timeoutMs }) {
    const acquired = acquireAndRecord(key, timeoutMs);
    acquired.catch(() => undefined);
    waiting.set(key, acquired);
    return { at: sharedClockMs() };
  },

  async awaitAcquired({ key }) {
    const acquired = waiting.get(key);
    if (!acquired) throw new Error(`not waiting for ${key}`);
    waiting.delete(key);
    return { at: await acquired };
  },

  async release({ key }) {
    const handle = held.get(key);
    if (!handle) throw new Error(`not holding ${key}`);
    held.delete(key);
    const at = sharedClockMs();
    await handle.release();
    return { at };
  },

  async contend(args) {
    const result = {
      sections: 0,
      failures: 0,
      commands: {} as Record<string, number>,
      cpuMicros: 0,
    };
    await sleep(Math.max(0, args.startAt - sharedClockMs()));
    const countFrom = args.startAt + args.warmupMs;
    const endAt = countFrom + args.durationMs;
    // Sections, commands and CPU all counted in the same window, opened and closed by the
    // same two callbacks: the warm-up before it and the drain after it (every worker
    // finishes the acquire it is in) are run but not counted.
    let counting = false;
    let cpuBefore = process.cpuUsage();
    const windowOpened = atSharedClock(countFrom, () => {
      counting = true;
      commandsSent = {};
      cpuBefore = process.cpuUsage();
    });
    const windowClosed = windowOpened.then(() =>
      atSharedClock(endAt, () => {
        counting = false;
        const cpu = process.cpuUsage(cpuBefore);
        result.cpuMicros = cpu.user + cpu.system;
        // A copy: the drain's commands still go into `commandsSent`.
        result.commands = { ...commandsSent };
      }),
    );
    const worker = async () => {
      while (sharedClockMs() < endAt) {
        try {
          const handle = await requireLock().acquire(args.key, args.timeoutMs);
          await sleep(args.criticalSectionMs);
          await handle.release();
          if (counting) result.sections++;
        } catch {
          // Over the whole slice, warm-up and drain included: a wait that gave up is reported
          // whenever it happened.
          result.failures++;
        }
      }
    };
    await Promise.all(Array.from({ length: args.workers }, worker));
    await windowClosed;
    return result;
  },

  async ping({ count }) {
    const admin = client!.db('admin');
    const samples: number[] = [];
    for (let i = 0; i < count; i++) {
      const sentAt = sharedClockMs();
      await admin.command({ ping: 1 });
      samples.push(sharedClockMs() - sentAt);
    }
    return { samples };
  },

  async watchRelay() {
    if (!relayStream) {
      relayStream = relayCollection().watch([], { maxAwaitTimeMS: 1_000 });
      // Opens the server's cursor: every write from here on is an event on it.
      await relayStream.tryNext();
    }
    relayArrived = relayStream.next().then(() => sharedClockMs());
    relayArrived.catch(() => undefined);
    return { at: sharedClockMs() };
  },

  async relayWrite() {
    const at = sharedClockMs();
    await relayCollection().updateOne(
      { _id: 'relay' },
      { $inc: { n: 1 } },
      { upsert: true, writeConcern: { w: 'majority' } },
    );
    return { at };
  },

  async awaitRelay() {
    if (!relayArrived) throw new Error('not watching the relay');
    const at = await relayArrived;
    relayArrived = undefined;
    return { at };
  },

  async countCommands({ key }): Promise<CommandCounts> {
    commandsSent = {};
    const handle = await requireLock().acquire(key, 1000);
    const acquire = commandsSent;
    commandsSent = {};
    await handle.release();
    // Let a library's background work after release (if any) show up in the count.
    await sleep(50);
    return { acquire, release: commandsSent };
  },
};

export async function closeVariantLocks(): Promise<void> {
  for (const { lock: each, client: eachClient } of locks.values()) {
    await each.close().catch(() => undefined);
    await eachClient.close().catch(() => undefined);
  }
  await relayStream?.close().catch(() => undefined);
  await client?.close();
}
