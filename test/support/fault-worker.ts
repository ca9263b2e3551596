// A fault-suite worker process: one LockService, driven by its parent over IPC.
// The clock-skew import must stay first: it shifts `Date` before the library loads.
import './fault-clock-skew';
import { MongoClient } from 'mongodb';
import { LockService } from '../../lib';
import type { LockHandle } from '../../lib';
import { LockLostError } from '../../lib/errors';
import { sharedClockMs } from './fault-clock';
import { runContention } from './fault-contention';
import { FencedResource } from './fault-fenced-resource';
import { serveIpc } from './fault-ipc';
import type {
  HoldArgs,
  HeldLock,
  LossReport,
  StartArgs,
  WorkerEvent,
  WorkerOps,
} from './fault-protocol';
import type { SectionRecord } from '../faults/history/history';

interface HeldEntry {
  handle: LockHandle;
  start: number;
  signalAt: number | null;
  lostAt: number | null;
}

let service: LockService | undefined;
let client: MongoClient | undefined;
let resource: FencedResource | undefined;
let label = `pid${process.pid}`;
const held = new Map<string, HeldEntry>();

function report(section: SectionRecord): void {
  ipc.emit({ type: 'section', section } satisfies WorkerEvent);
}

function requireService(): LockService {
  if (!service) throw new Error('worker not started');
  return service;
}

function requireHeld(key: string): HeldEntry {
  const entry = held.get(key);
  if (!entry) throw new Error(`worker ${label} holds no lock on ${key}`);
  return entry;
}

const ipc = serveIpc<WorkerOps>({
  async start(args: StartArgs) {
    label = args.label;
    service = new LockService({
      uri: args.uri,
      dbName: args.dbName,
      collectionName: args.collectionName,
      holderId: `${args.label}:${process.pid}`,
      ...args.options,
    });
    await service.onModuleInit();
    client = new MongoClient(args.uri);
    resource = new FencedResource(client.db(args.dbName));
    return { holderId: service.holderId, pid: process.pid };
  },

  async contend(args) {
    return runContention(requireService(), args, label, report);
  },

  async hold(args: HoldArgs): Promise<HeldLock> {
    const handle = await requireService().acquire(args.key, {
      ttlMs: args.ttlMs,
      timeoutMs: args.timeoutMs,
      renew: args.renew,
    });
    const entry: HeldEntry = { handle, start: sharedClockMs(), signalAt: null, lostAt: null };
    handle.signal.addEventListener('abort', () => (entry.signalAt ??= sharedClockMs()));
    handle.lost$.subscribe(() => (entry.lostAt ??= sharedClockMs()));
    held.set(args.key, entry);
    return { key: args.key, fence: handle.fence.toString(), start: entry.start };
  },

  async release({ key }) {
    const entry = requireHeld(key);
    held.delete(key);
    const end = Math.min(entry.signalAt ?? Infinity, entry.lostAt ?? Infinity, sharedClockMs());
    let outcome: 'released' | 'lost' = 'released';
    try {
      await entry.handle.release();
      if (entry.signalAt !== null || entry.lostAt !== null) outcome = 'lost';
    } catch (error) {
      if (!(error instanceof LockLostError)) throw error;
      outcome = 'lost';
    }
    report(sectionOf(key, entry, end, outcome));
    return { outcome };
  },

  async waitForLoss({ key, timeoutMs }): Promise<LossReport> {
    const entry = requireHeld(key);
    const deadline = sharedClockMs() + timeoutMs;
    while ((entry.signalAt === null || entry.lostAt === null) && sharedClockMs() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    return { key, signalAt: entry.signalAt, lostAt: entry.lostAt };
  },

  async fencedWrite({ key, value }) {
    const entry = requireHeld(key);
    if (!resource) throw new Error('worker not started');
    const accepted = await resource.write(key, entry.handle.fence, value, label);
    return { accepted, fence: entry.handle.fence.toString() };
  },

  async close() {
    await service?.close();
    await client?.close();
    return { closed: true };
  },
});

function sectionOf(
  key: string,
  entry: HeldEntry,
  end: number,
  outcome: SectionRecord['outcome'],
): SectionRecord {
  return {
    key,
    fence: entry.handle.fence.toString(),
    holder: requireService().holderId,
    worker: label,
    pid: process.pid,
    start: entry.start,
    end,
    outcome,
  };
}
