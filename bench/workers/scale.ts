// A worker's `scale` operation, in a worker of its own started with --expose-gc so memory can
// be measured: many waiters on many keys in one LockService, every command it sends counted on
// the wire.
import { setMaxListeners } from 'node:events';
import { BSON, MongoClient, type CommandStartedEvent } from 'mongodb';
import { LockService } from '../../lib';
import type { LockHandle } from '../../lib';
import { LOCK_OPTION_DEFAULTS } from '../../lib/options';
import { sleep } from '../support/stats';
import type { ScaleArgs, ScaleResult } from '../worker-protocol';

/** The waiters' lease: the default, so that their entries renew as an application's would. */
const waiterTtlMs = LOCK_OPTION_DEFAULTS.defaultTtlMs;
/**
 * The parked window: one renewal period of a waiting entry (a third of its lease). Every entry
 * joined less than a period before the window opens, so the window holds exactly one renewal
 * of each: the steady rate of a parked key.
 */
const parkedMs = waiterTtlMs / 3;

const counts = { attempts: 0, joins: 0, bytes: 0, streamsOpened: 0, cursorsKilled: 0 };
/** Commands (findAndModify: join, renew, leave) per key, read from the command itself. */
const attemptsByKey = new Map<string, number>();

function onCommand(event: CommandStartedEvent): void {
  counts.bytes += BSON.calculateObjectSize(event.command);
  if (event.commandName === 'findAndModify') {
    counts.attempts++;
    // Only a join upserts: a key's document may not exist yet.
    if (event.command.upsert === true) counts.joins++;
    const key = String((event.command.query as { _id?: unknown } | undefined)?._id);
    attemptsByKey.set(key, (attemptsByKey.get(key) ?? 0) + 1);
  }
  const pipeline = event.command.pipeline as Record<string, unknown>[] | undefined;
  if (event.commandName === 'aggregate' && pipeline?.[0]?.$changeStream) counts.streamsOpened++;
  if (event.commandName === 'killCursors') counts.cursorsKilled++;
}

/**
 * Waits until every key's waiters are in line: the key's first waiter sent its join (the
 * others queue behind its entry, in this process: `localHandOff`).
 */
async function everyKeyInLine(keys: string[], maxMs = 120_000): Promise<void> {
  const inLine = (key: string) => (attemptsByKey.get(key) ?? 0) >= 1;
  const deadline = Date.now() + maxMs;
  while (Date.now() < deadline && !keys.every(inLine)) await sleep(20);
}

function memory(): { heap: number; rss: number } {
  global.gc?.();
  const usage = process.memoryUsage();
  return { heap: usage.heapUsed, rss: usage.rss };
}

async function serverCursorsOpen(client: MongoClient): Promise<number | null> {
  try {
    const status = await client.db('admin').command({ serverStatus: 1 });
    const open = status.metrics?.cursor?.open?.total;
    return typeof open === 'number' ? open : Number(open ?? Number.NaN) || null;
  } catch {
    return null;
  }
}

export async function waitAtScale(args: ScaleArgs): Promise<ScaleResult> {
  const waiterClient = new MongoClient(args.uri, { monitorCommands: true });
  waiterClient.on('commandStarted', onCommand);
  // The holder never waits: without a stream of its own, the server's open cursors are the
  // waiting service's.
  const holderService = new LockService({
    uri: args.uri,
    dbName: args.dbName,
    changeStreams: 'off',
  });
  const waiterService = new LockService({ client: waiterClient, dbName: args.dbName });
  await Promise.all([holderService.start(), waiterService.start()]);
  const keys = Array.from({ length: args.keys }, (_, i) => `scale:${i}`);
  const held = new Map<string, LockHandle>();
  for (let i = 0; i < keys.length; i += 50) {
    const batch = keys.slice(i, i + 50);
    const handles = await Promise.all(
      batch.map((key) => holderService.acquire(key, { ttlMs: 300_000 })),
    );
    handles.forEach((handle, j) => held.set(batch[j], handle));
  }

  const before = memory();
  // Streams are counted from the start: the service opens its stream in start().
  counts.attempts = 0;
  const cancel = new AbortController();
  // Every waiter listens on this one signal, as a shutdown signal would be shared.
  setMaxListeners(0, cancel.signal);
  const acquiredBy = new Map<string, LockHandle[]>();
  let failedWaits = 0;
  const waits = keys.flatMap((key) =>
    Array.from({ length: args.waitersPerKey }, () =>
      waiterService
        .acquire(key, { ttlMs: waiterTtlMs, timeoutMs: 600_000, signal: cancel.signal })
        .then((handle) => acquiredBy.set(key, [...(acquiredBy.get(key) ?? []), handle]))
        .catch(() => {
          if (!cancel.signal.aborted) failedWaits++;
        }),
    ),
  );
  await everyKeyInLine(keys);
  await sleep(200);
  const initialAttempts = counts.attempts;
  // Parked: nothing is released, so whatever is sent now is the waiting entries' own upkeep.
  const parkedFrom = counts.attempts;
  const parkedBytesFrom = counts.bytes;
  const parkedJoinsFrom = counts.joins;
  await sleep(parkedMs);
  const parkedAttemptsPerSecond = (counts.attempts - parkedFrom) / (parkedMs / 1000);
  const parkedBytesPerSecondPerKey =
    (counts.bytes - parkedBytesFrom) / (parkedMs / 1000) / args.keys;
  const parkedJoins = counts.joins - parkedJoinsFrom;
  const peak = memory();
  const streamsOpenAtPeak = counts.streamsOpened - counts.cursorsKilled;
  const serverCursorsOpenAtPeak = await serverCursorsOpen(waiterClient);

  // Release keys one by one; the first waiter of each takes it and keeps it (no cascade).
  // Commands are counted on the released key only, so other keys' renewals do not count.
  let releaseAttempts = 0;
  for (const key of keys.slice(0, args.releases)) {
    const before = attemptsByKey.get(key) ?? 0;
    await held.get(key)!.release();
    held.delete(key);
    while (!acquiredBy.has(key)) await sleep(2);
    releaseAttempts += (attemptsByKey.get(key) ?? 0) - before;
  }
  const attemptsPerRelease = releaseAttempts / args.releases;

  const cancelStart = Date.now();
  cancel.abort();
  await Promise.all(waits);
  const cancelMs = Date.now() - cancelStart;

  const waiters = args.keys * args.waitersPerKey;
  await waiterService.close();
  await holderService.close();
  await waiterClient.close();
  return {
    waiters,
    keys: args.keys,
    initialAttempts,
    parkedAttemptsPerSecond: Math.round(parkedAttemptsPerSecond * 10) / 10,
    parkedBytesPerSecondPerKey: Math.round(parkedBytesPerSecondPerKey),
    parkedWindowMs: parkedMs,
    parkedJoins,
    changeStreamsOpened: counts.streamsOpened,
    changeStreamsOpenAtPeak: streamsOpenAtPeak,
    serverCursorsOpenAtPeak,
    attemptsPerRelease,
    heapBytesPerWaiter: Math.round((peak.heap - before.heap) / waiters),
    rssBytesPerWaiter: Math.round((peak.rss - before.rss) / waiters),
    cancelMs,
    failedWaits,
  };
}
