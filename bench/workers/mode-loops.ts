// A worker's operations for the modes suite (`startModes`): one LockService on its own
// monitored client, running loops of acquire (in a lock mode) → hold → release on one key.
// Every time is on the shared clock, so sections of different processes can be laid side by
// side (concurrent holders, overtakes).
import { MongoClient, type CommandStartedEvent } from 'mongodb';
import { LockService } from '../../lib';
import { sharedClockMs } from '../../packages/process-harness/clock';
import { sleep } from '../support/stats';
import type {
  ModeLoopArgs,
  ModeLoopResult,
  SectionRecord,
  WorkerHandlers,
} from '../worker-protocol';

let client: MongoClient | undefined;
let service: LockService | undefined;
let commands: Record<string, number> = {};
/** Called with the time of the next findAndModify reply (a join's), then forgotten. */
let onNextJoinReply: ((at: number) => void) | undefined;

function countCommand(event: CommandStartedEvent): void {
  commands[event.commandName] = (commands[event.commandName] ?? 0) + 1;
}

function joinReplied(event: { commandName: string }): void {
  if (event.commandName !== 'findAndModify' || !onNextJoinReply) return;
  const notify = onNextJoinReply;
  onNextJoinReply = undefined;
  notify(sharedClockMs());
}

const round2 = (x: number) => Math.round(x * 100) / 100;

async function loop(args: ModeLoopArgs): Promise<ModeLoopResult> {
  if (!service) throw new Error('worker not started');
  const lockService = service;
  const result: ModeLoopResult = {
    sections: [],
    failures: 0,
    errors: [],
    commands: {},
    finishedLate: 0,
  };
  await sleep(Math.max(0, args.startAt - sharedClockMs()));
  commands = {};
  const endAt = args.startAt + args.durationMs;
  const [gapMin, gapMax] = args.gapMs;
  const worker = async () => {
    // Requesters that ask now and then start at a random point of their gap.
    if (gapMax > 0) await sleep(Math.random() * gapMax);
    while (sharedClockMs() < endAt) {
      let firstReplyAt: number | undefined;
      if (args.recordFirstReply) onNextJoinReply = (at) => (firstReplyAt = at);
      const askedAt = sharedClockMs();
      try {
        const handle = await lockService.acquire(args.key, {
          ...args.options,
          timeoutMs: args.timeoutMs,
          ttlMs: args.ttlMs,
          renew: false,
        });
        const acquiredAt = sharedClockMs();
        await sleep(args.holdMs);
        const releaseAt = sharedClockMs();
        await handle.release();
        const record: SectionRecord = [round2(askedAt), round2(acquiredAt), round2(releaseAt)];
        if (firstReplyAt !== undefined) record.push(round2(firstReplyAt));
        result.sections.push(record);
        if (acquiredAt > endAt) result.finishedLate++;
      } catch (error) {
        result.failures++;
        if (result.errors.length < 5) {
          result.errors.push(
            error instanceof Error ? `${error.name}: ${error.message}` : String(error),
          );
        }
        await sleep(10);
      }
      if (gapMax > 0) await sleep(gapMin + Math.random() * (gapMax - gapMin));
    }
  };
  await Promise.all(Array.from({ length: args.workers }, () => worker()));
  result.commands = commands;
  return result;
}

export const modeLoopOps: WorkerHandlers<'startModes' | 'modeLoop'> = {
  async startModes({ uri, dbName }) {
    client = new MongoClient(uri, { monitorCommands: true });
    client.on('commandStarted', countCommand);
    client.on('commandSucceeded', joinReplied);
    client.on('commandFailed', joinReplied);
    await client.connect();
    service = new LockService({ client, dbName });
    await service.start();
    return { pid: process.pid };
  },

  modeLoop: loop,
};

export async function closeModeLoops(): Promise<void> {
  await service?.close().catch(() => undefined);
  await client?.close().catch(() => undefined);
}
