import type { ChangeStream } from 'mongodb';
import { reopeningStream, StreamStalledError } from './line-events';

jest.setTimeout(30_000);

/** A stream whose reads are never answered (a connection gone silent); counts its opens. */
function silentStreams() {
  let opened = 0;
  const open = () => {
    opened += 1;
    return {
      once: () => undefined,
      tryNext: () => new Promise<never>(() => undefined),
      close: () => Promise.resolve(),
      resumeToken: undefined,
      bufferedCount: () => 0,
    } as unknown as ChangeStream<never, never>;
  };
  return { open, opened: () => opened };
}

describe('reopeningStream', () => {
  it('counts a read unanswered past its wait as a failure, reopens, and doubles the wait after each stall', async () => {
    const streams = silentStreams();
    const failures: unknown[] = [];
    const startedAt = performance.now();
    const failedAt: number[] = [];
    const watch = reopeningStream(
      streams.open,
      () => undefined,
      (error) => {
        failures.push(error);
        failedAt.push(performance.now() - startedAt);
      },
      undefined,
      { answerWithinMs: 100 },
    );
    try {
      // Nobody waits for a stream that cannot open.
      await watch.opened;
      while (failures.length < 2) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(failures.map((error) => (error as Error).message)).toEqual([
        // 100 ms is raised to 5 s: a loaded server answers late now and then.
        'a change stream read was not answered within 5000 ms',
        'a change stream read was not answered within 10000 ms',
      ]);
      expect(failures.every((error) => error instanceof StreamStalledError)).toBe(true);
      // After the getMore's own wait of 1 s: 6 s, then 11 s more.
      expect(failedAt[0]).toBeGreaterThanOrEqual(6_000);
      expect(failedAt[1] - failedAt[0]).toBeGreaterThanOrEqual(11_000);
      expect(streams.opened()).toBe(2);
    } finally {
      await watch.close();
    }
  });
});
