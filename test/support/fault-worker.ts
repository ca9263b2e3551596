// A fault-suite worker process: one LockService, driven by its parent over IPC.
// The clock-skew import must stay first: it shifts `Date` before the library loads.
import './fault-clock-skew';
import * as path from 'node:path';
import { MongoClient } from 'mongodb';
import type * as Library from '../../lib';
import type * as HealthLibrary from '../../lib/health';
import type { LockHandle, LockService } from '../../lib';
import { sharedClockMs, serveIpc } from '@nestjs-mongo-lock/process-harness';
import {
  deadlineToRecord,
  isLockLostError,
  runContention,
  sharedDeadline,
  watchSignal,
  type SignalWatch,
} from './fault-contention';
import { CommandTally } from './fault-command-tally';
import { EventRecorder } from './fault-events';
import { FencedResource } from './fault-fenced-resource';
import { runWithLock } from './fault-with-lock';
import { probeUntilRecovered } from './fault-recover';
import { leadershipHandlers, type LeadershipWorkerOps } from './fault-leadership';
import type {
  HoldArgs,
  HeldLock,
  LossReport,
  StartArgs,
  WorkerEvent,
  WorkerOps,
} from './fault-protocol';
import type { SectionRecord } from '../faults/history/history';
import type { ModeOptions, ModesWorkerOps } from '../faults/scenarios/modes-protocol';
import { modeOptionsOf, modesHandlers } from '../faults/scenarios/modes-worker';

/**
 * The library under test: the repository's `lib`, or a copy of it in `FAULT_LIB_DIR` (the
 * mutation test runs workers on a deliberately broken copy). Nothing else in this process
 * loads the library, so only one copy is ever in use.
 */
const libDir = process.env.FAULT_LIB_DIR
  ? path.resolve(process.env.FAULT_LIB_DIR)
  : path.resolve(__dirname, '../../lib');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const library = require(libDir) as typeof Library;
/** The library's health indicator, built lazily (it loads `@nestjs/terminus`). */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const health = () => require(path.join(libDir, 'health')) as typeof HealthLibrary;

interface HeldEntry {
  handle: LockHandle;
  start: number;
  watch: SignalWatch;
  lostAt: number | null;
}

let service: LockService | undefined;
let client: MongoClient | undefined;
/** The service's own client when the parent asked for command monitoring (`monitorCommands`). */
let lockClient: MongoClient | undefined;
let tally: CommandTally | undefined;
let resource: FencedResource | undefined;
let label = `pid${process.pid}`;
let dbName = '';
let uri = '';
const recorder = new EventRecorder();
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

// The mode scenarios' operations (`ModesWorkerOps`) and the leadership suite's
// (`LeadershipWorkerOps`) are served beside the suite's own.
const ipc = serveIpc<WorkerOps & ModesWorkerOps & LeadershipWorkerOps>({
  async start(args: StartArgs) {
    label = args.label;
    dbName = args.dbName;
    uri = args.uri;
    if (args.monitorCommands) {
      lockClient = new MongoClient(args.uri, { monitorCommands: true });
      tally = new CommandTally(lockClient, args.monitorCommands.slowMs);
    }
    if (args.sharedClient) lockClient ??= new MongoClient(args.uri);
    service = new library.LockService({
      ...(lockClient ? { client: lockClient } : { uri: args.uri }),
      dbName: args.dbName,
      collectionName: args.collectionName,
      holderId: `${args.label}:${process.pid}`,
      ...args.options,
    });
    await service.start();
    const appClient = args.sharedClient && lockClient ? lockClient : new MongoClient(args.uri);
    client = appClient;
    resource = new FencedResource(appClient.db(args.dbName));
    return { holderId: service.holderId, pid: process.pid, libDir };
  },

  async contend(args) {
    return runContention(requireService(), args, label, report);
  },

  // Mode options (`mode`, `permits`, `weight`, `scope`) are passed on when given.
  async hold(args: HoldArgs & ModeOptions): Promise<HeldLock> {
    const handle = await requireService().acquire(args.key, {
      ttlMs: args.ttlMs,
      timeoutMs: args.timeoutMs,
      renew: args.renew,
      ...modeOptionsOf(args),
    });
    const watch = watchSignal(handle);
    const entry: HeldEntry = { handle, start: sharedClockMs(), watch, lostAt: null };
    handle.lost$.subscribe(() => (entry.lostAt ??= sharedClockMs()));
    held.set(args.key, entry);
    return {
      key: args.key,
      fence: handle.fence.toString(),
      start: entry.start,
      deadline: sharedDeadline(handle),
    };
  },

  async release({ key }) {
    const entry = requireHeld(key);
    held.delete(key);
    const { watch } = entry;
    const end = Math.min(watch.signalAt ?? Infinity, entry.lostAt ?? Infinity, sharedClockMs());
    // Read just before release is sent (or kept from the abort): the deadline this section had.
    const deadline = deadlineToRecord(entry.handle, watch);
    let outcome: 'released' | 'lost' = 'released';
    try {
      await entry.handle.release();
      if (watch.signalAt !== null || entry.lostAt !== null) outcome = 'lost';
    } catch (error) {
      if (!isLockLostError(error)) throw error;
      outcome = 'lost';
    }
    report(sectionOf(key, entry, end, deadline, outcome));
    return { outcome };
  },

  async waitForLoss({ key, timeoutMs }): Promise<LossReport> {
    const entry = requireHeld(key);
    const deadline = sharedClockMs() + timeoutMs;
    while ((entry.watch.signalAt === null || entry.lostAt === null) && sharedClockMs() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    return { key, signalAt: entry.watch.signalAt, lostAt: entry.lostAt };
  },

  async fencedWrite({ key, value }) {
    const entry = requireHeld(key);
    if (!resource) throw new Error('worker not started');
    const accepted = await resource.write(key, entry.handle.fence, value, label);
    return { accepted, fence: entry.handle.fence.toString() };
  },

  async close() {
    await service?.close();
    await lockClient?.close();
    if (client !== lockClient) await client?.close();
    return { closed: true };
  },

  async heldCount() {
    return { library: requireService().diagnostics.held, open: held.size };
  },

  async releaseAll() {
    const calledAt = sharedClockMs();
    const released = await requireService().releaseAllHeld();
    return { released, calledAt, settledAt: sharedClockMs() };
  },

  async commandTally() {
    return { ...(tally?.counts ?? {}) };
  },

  async watchEvents({ keys }) {
    return recorder.watch(requireService(), keys);
  },

  async takeEvents({ unsubscribe }) {
    return recorder.take(unsubscribe ?? false);
  },

  async withLock(args) {
    return runWithLock(requireService(), args, label, report);
  },

  async recover(args) {
    if (!client) throw new Error('worker not started');
    return probeUntilRecovered(requireService(), client, client === lockClient, args, health);
  },

  ...modesHandlers({
    service: requireService,
    label: () => label,
    dbName: () => dbName,
    report,
  }),

  ...leadershipHandlers({
    service: requireService,
    label: () => label,
    uri: () => uri,
    dbName: () => dbName,
    report,
  }),
});

function sectionOf(
  key: string,
  entry: HeldEntry,
  end: number,
  deadline: number,
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
    deadline,
    signalAt: entry.watch.signalAt,
  };
}
