import type { ChangeStream } from 'mongodb';
import { setTimeout as sleep } from 'node:timers/promises';
import { reopeningStream, StreamStalledError } from './line-events';

jest.setTimeout(60_000);

/** One read of a scripted stream: never answered, or answered after `ms` with `changes`. */
type Read = 'silent' | { ms: number; changes: number };

/**
 * Streams whose reads follow `script` (one entry per server round trip, shared across reopens):
 * a round trip that brings several changes answers the next reads from the buffer at once.
 */
function scriptedStreams(script: Read[]) {
  let opened = 0;
  const open = () => {
    opened += 1;
    let buffered = 0;
    return {
      once: () => undefined,
      tryNext: async () => {
        if (buffered > 0) {
          buffered -= 1;
          return { change: true };
        }
        const read = script.shift() ?? 'silent';
        if (read === 'silent') return new Promise<never>(() => undefined);
        await sleep(read.ms);
        buffered = Math.max(0, read.changes - 1);
        return read.changes > 0 ? { change: true } : null;
      },
      bufferedCount: () => buffered,
      close: () => Promise.resolve(),
      resumeToken: undefined,
    } as unknown as ChangeStream<never, never>;
  };
  return { open, opened: () => opened };
}

describe('reopeningStream', () => {
  it('counts a read unanswered past its wait as a stall, doubles the bound after each, and resets it only on a prompt answer of the server', async () => {
    const streams = scriptedStreams([
      'silent',
      // After the first stall (bound 5 s): late but within the doubled bound, three changes.
      { ms: 7_000, changes: 3 },
      // The two buffered changes are answered at once: not a prompt server.
      'silent',
      // After the second stall (bound 10 s): a prompt empty answer of the server resets it.
      { ms: 10, changes: 0 },
      'silent',
    ]);
    const failures: string[] = [];
    const failedAt: number[] = [];
    const startedAt = performance.now();
    const watch = reopeningStream(
      streams.open,
      () => undefined,
      (error) => {
        expect(error).toBeInstanceOf(StreamStalledError);
        failures.push((error as Error).message.replace(/.* within /, ''));
        failedAt.push(performance.now() - startedAt);
      },
      undefined,
      // Raised to 5 s: a loaded server answers late now and then.
      { answerWithinMs: 100 },
    );
    try {
      // Nobody waits for a stream that cannot open.
      await watch.opened;
      while (failures.length < 3) await sleep(100);
      expect(failures).toEqual(['5000 ms', '10000 ms', '5000 ms']);
      // Each after the getMore's own wait of 1 s, then the bound.
      expect(failedAt[0]).toBeGreaterThanOrEqual(6_000);
      expect(failedAt[1] - failedAt[0]).toBeGreaterThanOrEqual(7_000 + 11_000);
      expect(failedAt[2] - failedAt[1]).toBeGreaterThanOrEqual(6_000);
      expect(streams.opened()).toBe(3);
    } finally {
      await watch.close();
    }
  });
});
