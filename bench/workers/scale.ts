// A worker's `scale` operation, in a worker of its own started with --expose-gc so memory can
// be measured: many waiters on many keys in one LockService, every command it sends counted on
// the wire.
import { setMaxListeners } from 'node:events';
import { BSON, MongoClient, type CommandStartedEvent } from 'mongodb';
import { LockService } from '../../lib';
import type { LockHandle } from '../../lib';
import { sleep } from '../support/stats';
import type { ScaleArgs, ScaleResult } from '../worker-protocol';

/** The parked window: past the first safety poll (5 s) and the first renewal of a place (6.7 s). */
const parkedMs = 8000;

const counts = { attempts: 0, bytes: 0, streamsOpened: 0, cursorsKilled: 0 };
/** Acquire attempts per key, read from the command itself. */
const attemptsByKey = new Map<string, number>();
/** Keys that saw an attempt able to take a place in line (the full one: it writes `waiting`). */
const fullAttemptKeys = new Set<string>();

function onCommand(event: CommandStartedEvent): void {
  counts.bytes += BSON.calculateObjectSize(event.command);
  if (event.commandName === 'findAndModify') {
    counts.attempts++;
    const key = String((event.command.query as { _id?: unknown } | undefined)?._id);
    attemptsByKey.set(key, (attemptsByKey.get(key) ?? 0) + 1);
    if (JSON.stringify(event.command.update).includes('"waiting"')) fullAttemptKeys.add(key);
  }
  const pipeline = event.command.pipeline as Record<string, unknown>[] | undefined;
  if (event.commandName === 'aggregate' && pipeline?.[0]?.$changeStream) counts.streamsOpened++;
  if (event.commandName === 'killCursors') counts.cursorsKilled++;
}

/**
 * Waits until every key's waiters are in line. Engine v1: its queue's head's first
 * attempt (the mutex's small command) found the key held, and the full attempt that takes its
 * place followed. Engine v2: the first waiter's join was sent (the others queue behind its
 * entry, in this process: `localHandOff`).
 */
async function everyKeyInLine(args: ScaleArgs, keys: string[], maxMs = 120_000): Promise<void> {
  const inLine =
    args.engine === 'v2'
      ? (key: string) => (attemptsByKey.get(key) ?? 0) >= 1
      : (key: string) => fullAttemptKeys.has(key);
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
  const engine = args.engine ?? 'v1';
  const holderService = new LockService({ uri: args.uri, dbName: args.dbName, engine });
  // The stream closes this soon after the last waiter leaves (checked after cancelling).
  const waiterService = new LockService({
    client: waiterClient,
    dbName: args.dbName,
    engine,
    streamIdleMs: 200,
  });
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
  // Streams are counted from the start: engine v2 opens its stream in start().
  counts.attempts = 0;
  const cancel = new AbortController();
  // Every waiter listens on this one signal, as a shutdown signal would be shared.
  setMaxListeners(0, cancel.signal);
  const acquiredBy = new Map<string, LockHandle[]>();
  let failedWaits = 0;
  const waits = keys.flatMap((key) =>
    Array.from({ length: args.waitersPerKey }, () =>
      waiterService
        .acquire(key, { ttlMs: 300_000, timeoutMs: 600_000, signal: cancel.signal })
        .then((handle) => acquiredBy.set(key, [...(acquiredBy.get(key) ?? []), handle]))
        .catch(() => {
          if (!cancel.signal.aborted) failedWaits++;
        }),
    ),
  );
  await everyKeyInLine(args, keys);
  await sleep(200);
  const initialAttempts = counts.attempts;
  // Parked: nothing is released, so whatever is sent now is the waiting layer's own polling.
  const parkedFrom = counts.attempts;
  const parkedBytesFrom = counts.bytes;
  await sleep(parkedMs);
  const parkedAttemptsPerSecond = (counts.attempts - parkedFrom) / (parkedMs / 1000);
  const parkedBytesPerSecondPerKey =
    (counts.bytes - parkedBytesFrom) / (parkedMs / 1000) / args.keys;
  const peak = memory();
  const streamsOpenAtPeak = counts.streamsOpened - counts.cursorsKilled;
  const serverCursorsOpenAtPeak = await serverCursorsOpen(waiterClient);

  // Release keys one by one; the first waiter of each takes it and keeps it (no cascade).
  // Attempts are counted on the released key only, so other keys' safety polls do not count.
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
  // The queues' withdrawals (one per key) are sent first; the stream's close, `streamIdleMs`
  // later, waits behind them for a connection.
  for (let waited = 0; waited < 10_000 && counts.streamsOpened > counts.cursorsKilled; waited += 50)
    await sleep(50);
  const changeStreamsOpenAfterCancel = counts.streamsOpened - counts.cursorsKilled;

  const waiters = args.keys * args.waitersPerKey;
  await waiterService.close();
  await holderService.close();
  await waiterClient.close();
  return {
    engine,
    waiters,
    keys: args.keys,
    initialAttempts,
    parkedAttemptsPerSecond: Math.round(parkedAttemptsPerSecond * 10) / 10,
    parkedBytesPerSecondPerKey: Math.round(parkedBytesPerSecondPerKey),
    parkedWindowMs: parkedMs,
    changeStreamsOpened: counts.streamsOpened,
    changeStreamsOpenAtPeak: streamsOpenAtPeak,
    serverCursorsOpenAtPeak,
    attemptsPerRelease,
    heapBytesPerWaiter: Math.round((peak.heap - before.heap) / waiters),
    rssBytesPerWaiter: Math.round((peak.rss - before.rss) / waiters),
    changeStreamsOpenAfterCancel,
    cancelMs,
    failedWaits,
  };
}
