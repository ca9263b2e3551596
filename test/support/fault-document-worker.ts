// A worker process of the document-commit fault scenario: one LockService, one DocumentLocks,
// a loop of lock → work → commit({ $inc }) on one document, driven by its parent over IPC.
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import type * as Library from '../../lib';
import type { DocumentLockHandle, DocumentLocks, LockService } from '../../lib';
import { sharedClockMs, serveIpc } from '@nestjs-mongo-lock/process-harness';
import { deadlineToRecord, isLockLostError, sharedDeadline, watchSignal } from './fault-contention';
import type {
  CommitLogEntry,
  DocumentContendArgs,
  DocumentContendStats,
  DocumentWorkerEvent,
  DocumentWorkerOps,
  DocumentWorkerStartArgs,
} from './fault-document-protocol';

/**
 * The library under test: the repository's `lib`, or a copy of it in `FAULT_LIB_DIR` (the
 * mutation test runs workers on a deliberately broken copy).
 */
const libDir = process.env.FAULT_LIB_DIR
  ? path.resolve(process.env.FAULT_LIB_DIR)
  : path.resolve(__dirname, '../../lib');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const library = require(libDir) as typeof Library;

let service: LockService | undefined;
let docs: DocumentLocks | undefined;
let label = `pid${process.pid}`;
/** The next section spins instead of sleeping (`arm`). */
let armed = false;

function emit(event: DocumentWorkerEvent): void {
  ipc.emit(event);
}

function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A freeze shows as a jump of the clock between two readings longer than this. */
const clockJumpMs = 200;
/** An armed section that is not frozen spins this long at most, then commits as usual. */
const armedSpinMaxMs = 700;

/**
 * Spins until the clock jumps (the process was frozen with SIGSTOP and thawed) or for at most
 * {@link armedSpinMaxMs}. A timer would not do: a process thawed after its timers were due
 * runs the handle's deadline timer first (and ours `workMs` later), so its `commit()` would
 * be refused locally and the server's check would go untested. Spinning, the thawed holder
 * calls `commit()` before its event loop runs any timer: the server must refuse it.
 */
function spinUntilThawed(begin: number): boolean {
  let last = begin;
  for (;;) {
    const now = performance.now();
    if (now - last > clockJumpMs) return true;
    if (now - begin > armedSpinMaxMs) return false;
    last = now;
  }
}

/**
 * One section: work (a sleep, or a spin when armed), then `commit({ $inc })` with the counter
 * seen at acquisition pushed to the document's log.
 */
async function section(
  handle: DocumentLockHandle,
  args: DocumentContendArgs,
  stats: DocumentContendStats,
): Promise<void> {
  const start = sharedClockMs();
  const watch = watchSignal(handle);
  const fence = handle.fence.toString();
  const seen = Number(handle.doc.counter);
  const workMs = args.workMinMs + Math.random() * (args.workMaxMs - args.workMinMs);
  const holder = service?.holderId ?? label;
  const common = { worker: label, holder, pid: process.pid, fence };
  const spin = armed;
  armed = false;
  // Read before the parent hears of the acquisition: its SIGSTOP may land inside `emit`.
  const spinFrom = performance.now();
  emit({
    type: 'acquired',
    ...common,
    start,
    deadline: sharedDeadline(handle),
    workMs,
    armed: spin,
    seen,
  });
  // No await between the spin and the commit call: nothing else may run in between.
  let thawed = false;
  if (spin) thawed = spinUntilThawed(spinFrom);
  else await sleep(workMs);

  const commitCalledAt = sharedClockMs();
  const deadline = deadlineToRecord(handle, watch);
  // From the abort listener, not the `signal` getter: reading the getter checks the local
  // deadline and would refuse the commit locally, leaving the server's check untested.
  const abortedBeforeCall = watch.signalAt !== null;
  const entry: CommitLogEntry = { worker: label, pid: process.pid, fence, seen };
  let outcome: 'committed' | 'lost' = 'committed';
  let error: string | null = null;
  try {
    await handle.commit({ $inc: { counter: 1 }, $push: { commits: entry } });
    stats.committed += 1;
  } catch (caught) {
    error = describeError(caught);
    if (isLockLostError(caught)) {
      outcome = 'lost';
      stats.lost += 1;
    } else {
      // Not the library's answer for a lost lease: the parent reports it as a violation.
      outcome = 'lost';
      stats.errors.push(`commit of fence ${fence}: ${error}`);
    }
  }
  emit({
    type: 'commit',
    ...common,
    start,
    seen,
    commitCalledAt,
    deadline,
    signalAt: watch.signalAt,
    abortedBeforeCall,
    thawed,
    outcome,
    error,
    settledAt: sharedClockMs(),
  });
}

const ipc = serveIpc<DocumentWorkerOps>({
  async start(args: DocumentWorkerStartArgs) {
    label = args.label;
    service = new library.LockService({
      uri: args.uri,
      dbName: args.dbName,
      holderId: `${args.label}:${process.pid}`,
      ...args.options,
    });
    await service.start();
    docs = service.documents(args.collection);
    return { holderId: service.holderId, pid: process.pid, libDir };
  },

  async contend(args: DocumentContendArgs): Promise<DocumentContendStats> {
    if (!docs) throw new Error('worker not started');
    const stats: DocumentContendStats = {
      sections: 0,
      committed: 0,
      lost: 0,
      timeouts: 0,
      errors: [],
    };
    while (sharedClockMs() < args.stopAt) {
      let handle: DocumentLockHandle;
      try {
        handle = await docs.acquire(args.id, {
          ttlMs: args.ttlMs,
          renew: false,
          // Waits may span a frozen holder's whole lease; never much past the end of the run.
          timeoutMs: Math.max(1_000, Math.round(args.stopAt - sharedClockMs())),
        });
      } catch (error) {
        if (error instanceof Error && error.name === 'LockNotAcquiredError') stats.timeouts += 1;
        else stats.errors.push(`acquire: ${describeError(error)}`);
        await sleep(20);
        continue;
      }
      stats.sections += 1;
      await section(handle, args, stats);
    }
    return stats;
  },

  async arm(args: { armed: boolean }) {
    armed = args.armed;
    return { armed };
  },

  async close() {
    await service?.close();
    return { closed: true };
  },
});
