import { BSON, MongoClient, type CommandStartedEvent } from 'mongodb';
import { LockService, type LockHandle } from '../../lib';
import type { AcquireOptions } from '../../lib/interfaces';
import { LOCK_OPTION_DEFAULTS } from '../../lib/options';
import { sleep } from '../support/stats';

export const commandKinds = [
  'free acquire',
  'contended attempt',
  'release',
  'renew',
  'withdrawal',
] as const;
export type CommandKind = (typeof commandKinds)[number];

/**
 * What each lock type's callers ask for, and what holds the key against them (A): for a
 * shared lock an exclusive holder, whose renewal and release are a mutex's and not counted.
 */
const lockTypes = {
  mutex: { options: {}, blocker: {}, countBlocker: true },
  shared: { options: { mode: 'shared' }, blocker: {}, countBlocker: false },
  semaphore: { options: { permits: 3 }, blocker: { permits: 3, weight: 3 }, countBlocker: true },
} satisfies Record<
  string,
  { options: AcquireOptions; blocker: AcquireOptions; countBlocker: boolean }
>;
export type LockType = keyof typeof lockTypes;

export interface CommandSizeRow {
  lockType: LockType;
  kind: CommandKind;
  /** The largest command of this kind (BSON size of the command document); null if none seen. */
  bytes: number | null;
  /** That command's name. */
  command: string | null;
  /** How many commands of this kind were seen. */
  commands: number;
}

export interface CommandSizesResult {
  rows: CommandSizeRow[];
  /** The mutex key's document after A handed it to waiter B and B released: top-level fields. */
  documentAfterHandoff: { fields: string[]; bytes: number };
}

type Party = 'A' | 'B';

/** A change stream's own traffic: the library's, but no lock command. */
function isStreamTraffic(event: CommandStartedEvent): boolean {
  if (['getMore', 'killCursors', 'endSessions'].includes(event.commandName)) return true;
  return event.commandName === 'aggregate' && Boolean(event.command.pipeline?.[0]?.$changeStream);
}

/**
 * The size on the wire of each kind of command our library sends, for a mutex, a shared lock
 * and a semaphore: two `LockService`s in this process (A and B, as two processes would be),
 * each on its own client with command monitoring. Every command is classified by the scenario
 * step its service was in when it was sent; a step lasts until the next one begins, so a
 * command a call leaves to the background counts with it.
 */
export async function measureCommandSizes(uri: string): Promise<CommandSizesResult> {
  const dbName = 'bench_command_sizes';
  let lockType: LockType = 'mutex';
  let step: Partial<Record<Party, CommandKind>> = {};
  const largest = new Map<string, { bytes: number; command: string; commands: number }>();
  const open = async (party: Party) => {
    const client = new MongoClient(uri, { monitorCommands: true });
    client.on('commandStarted', (event) => {
      const kind = step[party];
      if (!kind || isStreamTraffic(event)) return;
      const bytes = BSON.calculateObjectSize(event.command);
      const seen = largest.get(`${lockType}/${kind}`);
      largest.set(`${lockType}/${kind}`, {
        ...(seen && seen.bytes >= bytes ? seen : { bytes, command: event.commandName }),
        commands: (seen?.commands ?? 0) + 1,
      });
    });
    await client.connect();
    // With MONGODB_URI, an earlier run's documents: a new key must be new.
    if (party === 'A') await client.db(dbName).dropDatabase();
    const service = new LockService({ client, dbName });
    await service.start();
    return { client, service };
  };
  const a = await open('A');
  const b = await open('B');
  const during = async <T>(next: typeof step, work: () => Promise<T>): Promise<T> => {
    step = next;
    return work();
  };
  const hold = { ttlMs: 30_000, renew: false };
  let documentAfterHandoff: CommandSizesResult['documentAfterHandoff'] | undefined;
  try {
    for (const [type, { options, blocker: blockerOptions, countBlocker }] of Object.entries(
      lockTypes,
    )) {
      lockType = type as LockType;
      const key = `command-sizes:${type}`;
      const acquire = (party: typeof a, extra: AcquireOptions) =>
        party.service.acquire(key, { ...hold, ...options, ...extra });
      // Free: a key never seen, then the same key once released.
      for (let i = 0; i < 2; i++) {
        const handle = await during({ B: 'free acquire' }, () => acquire(b, {}));
        await during({ B: 'renew' }, () => handle.extend());
        await during({ B: 'release' }, () => handle.release());
      }
      const blocker = await during({}, () =>
        a.service.acquire(key, { ...hold, ...blockerOptions }),
      );
      // A waiter that times out and leaves the line. It leaves before its call rejects, so
      // what it sends from 50 ms before its deadline on is its withdrawal: A holds throughout,
      // so B has no reason to try again then (its attempts go out in its first milliseconds).
      const waitMs = 300;
      const deadline = setTimeout(() => (step = { B: 'withdrawal' }), waitMs - 50);
      const timedOut = await during({ B: 'contended attempt' }, () =>
        acquire(b, { timeoutMs: waitMs }).then(
          () => false,
          () => true,
        ),
      );
      clearTimeout(deadline);
      if (!timedOut) throw new Error(`${type}: B acquired a key A holds`);
      await during({ B: 'withdrawal' }, () => sleep(500));
      // A hand-off: B waits, A renews and releases, B acquires and releases.
      const waiter = await during({ B: 'contended attempt' }, async () => {
        const acquired: Promise<LockHandle> = acquire(b, { timeoutMs: 5_000 });
        acquired.catch(() => undefined);
        await sleep(200);
        return { acquired };
      });
      const asBlocker = (kind: CommandKind) => (countBlocker ? { A: kind } : {});
      await during({ ...asBlocker('renew'), B: 'contended attempt' }, () => blocker.extend());
      await during({ ...asBlocker('release'), B: 'contended attempt' }, () => blocker.release());
      const handed = await waiter.acquired;
      await during({ B: 'release' }, () => handed.release());
      await during({}, () => sleep(200));
      if (type === 'mutex') {
        const doc = await a.client
          .db(dbName)
          .collection(`${LOCK_OPTION_DEFAULTS.collectionName}_line`)
          .findOne({ _id: key as never });
        if (!doc) throw new Error('no lock document after the hand-off');
        documentAfterHandoff = { fields: Object.keys(doc), bytes: BSON.calculateObjectSize(doc) };
      }
    }
  } finally {
    step = {};
    for (const { client, service } of [a, b]) {
      await service.close().catch(() => undefined);
      await client.close().catch(() => undefined);
    }
  }
  const rows = Object.keys(lockTypes).flatMap((type) =>
    commandKinds.map((kind): CommandSizeRow => {
      const seen = largest.get(`${type}/${kind}`);
      return {
        lockType: type as LockType,
        kind,
        bytes: seen?.bytes ?? null,
        command: seen?.command ?? null,
        commands: seen?.commands ?? 0,
      };
    }),
  );
  return { rows, documentAfterHandoff: documentAfterHandoff! };
}
