import { Timestamp } from 'mongodb';
import type { OpenLockChangeStreamOptions } from '../store/lock-change-stream';
import type { LockChangeStream } from '../store/lock-document';
import { LockChangeFeed } from './change-feed';
import type { KeySignal } from './change-feed';

/** A stand-in for the driver's change stream: the test pushes events or errors into it. */
class FakeStream {
  closed = false;
  resumeToken: unknown = undefined;
  private readonly pending: { change?: unknown; error?: Error }[] = [];
  private wake: (() => void) | undefined;

  constructor(readonly options: OpenLockChangeStreamOptions) {}

  push(item: { change?: unknown; error?: Error }) {
    this.pending.push(item);
    this.wake?.();
  }

  async tryNext(): Promise<unknown> {
    if (this.pending.length === 0) {
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, 5);
      });
    }
    const item = this.pending.shift();
    if (item?.error) throw item.error;
    return item?.change ?? null;
  }

  async close() {
    this.closed = true;
  }
}

const ts = (t: number) => new Timestamp({ t, i: 0 });
const flush = () => new Promise((resolve) => setTimeout(resolve, 20));
const released = (key: string) => ({
  operationType: 'update',
  documentKey: { _id: key },
  updateDescription: { updatedFields: { owner: null } },
});
const acquired = (key: string) => ({
  operationType: 'update',
  documentKey: { _id: key },
  updateDescription: { updatedFields: { owner: 'token', holder: 'h' } },
});

const feeds: LockChangeFeed[] = [];
afterEach(async () => {
  await Promise.all(feeds.splice(0).map((feed) => feed.close()));
});

function setUp(
  changeStreams: 'auto' | 'off' = 'auto',
  idleMs = 0,
  onOpen: (stream: FakeStream) => void = () => undefined,
) {
  const streams: FakeStream[] = [];
  const logger = { warn: jest.fn(), error: jest.fn() };
  const feed = new LockChangeFeed(
    (options) => {
      const stream = new FakeStream(options);
      streams.push(stream);
      onOpen(stream);
      return stream as unknown as LockChangeStream;
    },
    logger,
    changeStreams,
    10_000,
    undefined,
    idleMs,
  );
  feeds.push(feed);
  return { feed, streams, logger };
}

function recorder() {
  const signals: KeySignal[] = [];
  return { signals, watcher: (signal: KeySignal) => void signals.push(signal) };
}

describe('LockChangeFeed', () => {
  it('opens one stream at the first attempt time and shares it between keys', async () => {
    const { feed, streams } = setUp();
    const a = recorder();
    const b = recorder();
    feed.watchKey('a', a.watcher, ts(10));
    feed.watchKey('b', b.watcher, ts(11));
    expect(streams).toHaveLength(1);
    expect(streams[0].options.startAtOperationTime).toEqual(ts(10));
    await flush();
    expect(b.signals).toEqual([]);
  });

  it('fans out releases by key and ignores acquisitions', async () => {
    const { feed, streams } = setUp();
    const a = recorder();
    const b = recorder();
    feed.watchKey('a', a.watcher, ts(10));
    feed.watchKey('b', b.watcher, ts(10));
    streams[0].push({ change: acquired('a') });
    streams[0].push({ change: released('b') });
    await flush();
    expect(a.signals).toEqual([]);
    expect(b.signals).toEqual(['released']);
  });

  it('asks a watcher whose attempt predates the stream start to look again', async () => {
    const { feed } = setUp();
    feed.watchKey('a', () => undefined, ts(20));
    const late = recorder();
    feed.watchKey('b', late.watcher, ts(19));
    await flush();
    expect(late.signals).toEqual(['recheck']);
  });

  it('tells a watcher on its coming with promise continuations alone, as under fake timers', async () => {
    const { feed } = setUp();
    feed.watchKey('a', () => undefined, ts(20));
    jest.useFakeTimers();
    try {
      const late = recorder();
      feed.watchKey('b', late.watcher, ts(19));
      for (let turn = 0; turn < 10; turn++) await Promise.resolve();
      expect(late.signals).toEqual(['recheck']);
    } finally {
      jest.useRealTimers();
    }
  });

  it('closes the stream when the last watcher leaves', async () => {
    const { feed, streams } = setUp();
    const stopEvents = feed.watchEvents(() => undefined);
    const stopA = feed.watchKey('a', () => undefined, ts(1));
    stopEvents();
    expect(streams[0].closed).toBe(false);
    stopA();
    expect(streams[0].closed).toBe(true);
    expect(feed.streamOpen).toBe(false);
  });

  describe('with idleMs (streamIdleMs)', () => {
    // On fake time: the test looks at the stream 300 ms before and after idleMs ends, which
    // real timers on a loaded machine can overshoot.
    beforeEach(() => jest.useFakeTimers());
    afterEach(async () => {
      await Promise.all(feeds.splice(0).map((feed) => feed.close()));
      jest.useRealTimers();
    });
    /** Advances fake time, running the timers and the promise callbacks they lead to. */
    const advance = (ms: number) => jest.advanceTimersByTimeAsync(ms);
    it('keeps the stream idleMs after the last watcher leaves; a watcher meanwhile takes it over', async () => {
      const { feed, streams } = setUp('auto', 600);
      feed.watchKey('a', () => undefined, ts(1))();
      await advance(300);
      expect(streams[0].closed).toBe(false);
      // A later attempt than the stream's start is covered by it: no new stream, no recheck.
      const b = recorder();
      feed.watchKey('b', b.watcher, ts(2))();
      await advance(20);
      expect(streams).toHaveLength(1);
      expect(b.signals).toEqual([]);
      // idleMs counts from the last watcher's leaving, not the first's.
      await advance(400);
      expect(streams[0].closed).toBe(false);
      await advance(500);
      expect(streams[0].closed).toBe(true);
      expect(feed.streamOpen).toBe(false);
    });

    it('tells a watcher that comes later of a release the idle stream heard after its attempt', async () => {
      const { feed, streams } = setUp('auto', 1_000);
      feed.watchKey('a', () => undefined, ts(1))();
      streams[0].push({ change: { ...released('k'), clusterTime: ts(5) } });
      await advance(20);
      const late = recorder();
      feed.watchKey('k', late.watcher, ts(4));
      await advance(20);
      expect(late.signals).toEqual(['released']);
    });

    it('closes at once when the feed closes', async () => {
      const { feed, streams } = setUp('auto', 60_000);
      feed.watchKey('a', () => undefined, ts(1))();
      await feed.close();
      expect(streams[0].closed).toBe(true);
    });

    it('drops an idle stream that fails without reopening it or warning', async () => {
      const { feed, streams, logger } = setUp('auto', 60_000);
      feed.watchKey('a', () => undefined, ts(1))();
      streams[0].push({ error: new Error('connection reset') });
      await advance(300);
      expect(streams).toHaveLength(1);
      expect(feed.streamOpen).toBe(false);
      expect(logger.warn).not.toHaveBeenCalled();
      // The next watcher opens a new one from its own attempt.
      feed.watchKey('b', () => undefined, ts(7));
      expect(streams).toHaveLength(2);
      expect(streams[1].options.startAtOperationTime).toEqual(ts(7));
    });
  });

  it('switches to polling on error 40573, tells every watcher, and warns once', async () => {
    const { feed, streams, logger } = setUp();
    const a = recorder();
    feed.watchKey('a', a.watcher, undefined);
    streams[0].push({ error: Object.assign(new Error('not a replica set'), { code: 40573 }) });
    await flush();
    expect(feed.streaming).toBe(false);
    expect(a.signals).toContain('recheck');
    feed.watchKey('b', () => undefined, undefined);
    feed.watchEvents(() => undefined);
    expect(streams).toHaveLength(1);
    expect(logger.warn).toHaveBeenCalledTimes(1);
  });

  it("never opens a stream with changeStreams 'off'", () => {
    const { feed, streams, logger } = setUp('off');
    feed.watchKey('a', () => undefined, ts(1));
    feed.watchKey('b', () => undefined, ts(1));
    expect(streams).toHaveLength(0);
    expect(logger.warn).toHaveBeenCalledTimes(1);
    expect(logger.warn.mock.calls[0][0]).toContain("changeStreams is 'off'");
  });

  it('reopens after a non-resumable error, resuming after the last event, and has everyone look again', async () => {
    const { feed, streams } = setUp();
    const a = recorder();
    feed.watchKey('a', a.watcher, ts(1));
    streams[0].push({ change: acquired('x') });
    await flush();
    streams[0].resumeToken = { _data: 'token-1' };
    streams[0].push({ error: Object.assign(new Error('boom'), { code: 8000 }) });
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(streams).toHaveLength(2);
    expect(streams[0].closed).toBe(true);
    expect(streams[1].options).toMatchObject({ resumeAfter: { _data: 'token-1' } });
    expect(a.signals).toContain('recheck');
    streams[1].push({ change: released('a') });
    await flush();
    expect(a.signals).toContain('released');
    await feed.close();
    expect(streams[1].closed).toBe(true);
  });

  it('asks waiters-only streams for releases, and widens to acquisitions for events$ without a gap', async () => {
    const { feed, streams } = setUp();
    feed.watchKey('a', () => undefined, ts(5));
    expect(streams[0].options).toMatchObject({ scope: 'releases', startAtOperationTime: ts(5) });
    await flush();
    streams[0].resumeToken = { _data: 'token-7' };
    feed.watchEvents(() => undefined);
    expect(streams[0].closed).toBe(true);
    expect(streams[1].options).toMatchObject({
      scope: 'ownership',
      resumeAfter: { _data: 'token-7' },
    });
  });

  describe('what a watcher hears about releases streamed around its attempt', () => {
    const releasedAt = (key: string, t: number) => ({ ...released(key), clusterTime: ts(t) });

    it('tells a watcher that comes late of a release streamed after its attempt', async () => {
      const { feed, streams } = setUp();
      feed.watchKey('other', () => undefined, ts(10));
      await flush();
      streams[0].push({ change: releasedAt('a', 15) }); // before anyone watches 'a'
      await flush();
      const late = recorder();
      feed.watchKey('a', late.watcher, ts(12)); // its attempt (at 12) saw the key held
      await flush();
      expect(late.signals).toEqual(['released']);
      const current = recorder();
      feed.watchKey('a', current.watcher, ts(16)); // its attempt came after that release
      await flush();
      expect(current.signals).toEqual([]);
    });

    it('ignores a streamed release no newer than what the watcher has seen', async () => {
      const { feed, streams } = setUp();
      const a = recorder();
      feed.watchKey('a', a.watcher, ts(20));
      streams[0].push({ change: releasedAt('a', 19) });
      streams[0].push({ change: releasedAt('a', 20) });
      await flush();
      expect(a.signals).toEqual([]);
      streams[0].push({ change: releasedAt('a', 21) });
      await flush();
      expect(a.signals).toEqual(['released']);
    });
  });

  describe('reopening', () => {
    // The backoff runs (50, 200, 500 ms...) on fake time: real timers run late on a loaded
    // machine, and these tests count the streams opened within a time.
    beforeEach(() => jest.useFakeTimers());
    afterEach(async () => {
      await Promise.all(feeds.splice(0).map((feed) => feed.close()));
      jest.useRealTimers();
    });
    /** Advances fake time, running the timers and the promise callbacks they lead to. */
    const advance = (ms: number) => jest.advanceTimersByTimeAsync(ms);
    const fail = (code: number) => ({ error: Object.assign(new Error('boom'), { code }) });
    const reopened = () => advance(120);

    it('keeps resuming after the last event seen through several failures in a row', async () => {
      const { feed, streams } = setUp();
      feed.watchEvents(() => undefined);
      await advance(20);
      streams[0].resumeToken = { _data: 'token-1' };
      streams[0].push(fail(8000));
      await reopened();
      streams[1].push(fail(8000)); // fails before any event: no token of its own
      await advance(350);
      expect(streams).toHaveLength(3);
      expect(streams[2].options).toMatchObject({ resumeAfter: { _data: 'token-1' } });
    });

    it('waits longer after each failure when the stream opens but never reads', async () => {
      // Each open answers with a batch of two changes fetched at once; its first getMore fails.
      const { feed, streams } = setUp('auto', 0, (stream) => {
        stream.push({ change: acquired('x') });
        stream.push({ change: acquired('y') });
        stream.push(fail(8000));
      });
      feed.watchKey('a', () => undefined, ts(1));
      await advance(900);
      // Opened at 0, 50, 250 and 750 ms; 50 ms apart it would be 18.
      expect(streams.length).toBeGreaterThanOrEqual(3);
      expect(streams.length).toBeLessThanOrEqual(4);
    });

    it('after failures in a row, a stream that served its watchers until they left ends the run', async () => {
      let failing = 2;
      const { feed, streams } = setUp('auto', 0, (stream) => {
        if (failing-- > 0) stream.push(fail(8000));
        else stream.push({ change: released('a') });
      });
      // Opened at 0, failed; 50 ms later, failed; 200 ms later, the release: the watcher leaves.
      const unwatch = feed.watchKey('a', () => unwatch(), ts(1));
      await advance(400);
      expect(streams).toHaveLength(3);
      expect(feed.streamOpen).toBe(false);
      // The next stream fails once: reopened after 50 ms, not after the third failure's 500.
      failing = 1;
      feed.watchKey('b', () => undefined, ts(2));
      await advance(150);
      expect(streams).toHaveLength(5);
    });

    it('a stream that ran a while before failing starts a new run of failures', async () => {
      let failing = 2;
      const { feed, streams } = setUp('auto', 0, (stream) => {
        if (failing-- > 0) stream.push(fail(8000));
      });
      feed.watchKey('a', () => undefined, ts(1));
      // Opened at 0, failed; 50 ms later, failed; 200 ms later, a stream that keeps answering.
      await advance(1_400);
      expect(streams).toHaveLength(3);
      streams[2].push(fail(8000));
      // Reopened after 50 ms, not after the third failure's 500.
      await advance(150);
      expect(streams).toHaveLength(4);
    });

    it('a stream that never answered continues the run however long it waited (an outage)', async () => {
      // Each stream's first read waits 1.05 s for a server that is gone, then fails (a stall).
      const { feed, streams, logger } = setUp('auto', 0, (stream) => {
        stream.tryNext = () =>
          new Promise((_, reject) => setTimeout(() => reject(new Error('stalled')), 1_050));
      });
      feed.watchKey('a', () => undefined, ts(1));
      for (let waited = 0; streams.length < 3 && waited < 6_000; waited += 20) await advance(20);
      expect(streams).toHaveLength(3);
      // One warning for the run, not one per stall.
      expect(logger.warn).toHaveBeenCalledTimes(1);
    });

    it('starts afresh, and warns events$ listeners, when the server cannot resume', async () => {
      const { feed, streams, logger } = setUp();
      feed.watchEvents(() => undefined);
      await advance(20);
      streams[0].resumeToken = { _data: 'token-1' };
      streams[0].push(fail(286)); // ChangeStreamHistoryLost
      await reopened();
      expect(streams[1].options.resumeAfter).toBeUndefined();
      expect(logger.warn.mock.calls.map((call) => String(call[0])).join('\n')).toContain(
        'may have missed events',
      );
    });

    it('does not open a second stream for events$ while a failed one waits to reopen', async () => {
      const { feed, streams } = setUp();
      feed.watchKey('a', () => undefined, ts(1));
      await advance(20);
      streams[0].resumeToken = { _data: 'token-1' };
      streams[0].push(fail(8000));
      await advance(20);
      feed.watchEvents(() => undefined);
      expect(streams).toHaveLength(1);
      await reopened();
      expect(streams).toHaveLength(2);
      expect(streams[1].options).toMatchObject({
        scope: 'ownership',
        resumeAfter: { _data: 'token-1' },
      });
    });
  });
});
