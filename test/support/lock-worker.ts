/**
 * A child process that uses LockService as another application instance would, for the
 * multi-process lock tests. Started by test/lock-service/lock-test-kit.ts with
 * `node -r ts-node/register/transpile-only`; arguments in LOCK_WORKER_ARGS (JSON); reports
 * over IPC.
 *
 * Modes:
 * - `hold`: acquire `key` (ttlMs), report `acquired`, release on a `release` message,
 *   report `released`. The test may SIGKILL it instead.
 * - `contend`: `iterations` times, withLock(`key`) and inside it read-sleep-write the
 *   counter file `counterFile`; record each grant's fence and section times; report `done`.
 *
 * In either mode a `ping` message is answered `pong` (with `streamOpen`): a process whose
 * event loop no longer turns answers nothing.
 */
import 'reflect-metadata';
import { readFileSync, writeFileSync } from 'node:fs';
import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import { LockService } from '../../lib/lock.service';

interface WorkerArgs {
  mode: 'hold' | 'contend';
  uri: string;
  dbName: string;
  collectionName: string;
  key: string;
  ttlMs?: number;
  iterations?: number;
  counterFile?: string;
  sectionMs?: number;
  changeStreams?: 'auto' | 'off';
}

const args = JSON.parse(process.env.LOCK_WORKER_ARGS ?? '{}') as WorkerArgs;
const send = (message: Record<string, unknown>) => process.send?.(message);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function hold(locks: LockService): Promise<void> {
  const handle = await locks.acquire(args.key, { ttlMs: args.ttlMs, timeoutMs: 30_000 });
  const released = new Promise<void>((resolve) =>
    process.on('message', (message: { type?: string }) => {
      if (message.type === 'release') resolve();
    }),
  );
  send({ type: 'acquired', fence: handle.fence.toString(), at: sharedClockMs() });
  await released;
  const releasedAt = sharedClockMs();
  await handle.release();
  send({ type: 'released', at: releasedAt });
}

async function contend(locks: LockService): Promise<void> {
  const sections: { fence: string; start: number; end: number; pid: number }[] = [];
  for (let index = 0; index < (args.iterations ?? 10); index += 1) {
    await locks.withLock(
      args.key,
      async (handle) => {
        const start = sharedClockMs();
        // A read-modify-write with a pause: overlapping holders would lose increments.
        const counter = Number(readFileSync(args.counterFile!, 'utf8'));
        await sleep(args.sectionMs ?? 5);
        writeFileSync(args.counterFile!, String(counter + 1));
        sections.push({
          fence: handle.fence.toString(),
          start,
          end: sharedClockMs(),
          pid: process.pid,
        });
      },
      { timeoutMs: 60_000, ttlMs: args.ttlMs },
    );
  }
  send({ type: 'done', sections });
}

async function main(): Promise<void> {
  const locks = new LockService({
    uri: args.uri,
    dbName: args.dbName,
    collectionName: args.collectionName,
    changeStreams: args.changeStreams,
  });
  await locks.start();
  process.on('message', (message: { type?: string }) => {
    if (message.type === 'ping') send({ type: 'pong', streamOpen: locks.diagnostics.streamOpen });
  });
  try {
    if (args.mode === 'hold') await hold(locks);
    else await contend(locks);
  } finally {
    await locks.close();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    send({ type: 'error', message: error instanceof Error ? error.stack : String(error) });
    process.exit(1);
  },
);
