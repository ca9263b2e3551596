import type { LineDocument } from '../../lib/store/line/line-document';
import type { CanActivate, INestApplication } from '@nestjs/common';
import { createServer, type AddressInfo } from 'node:net';
import { Agent, get as httpGet, type Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { MongoClient } from 'mongodb';
import { LockLostError, LockService, MongoLockModule } from '../../lib';
import { MongoLockBoardModule } from '../../lib/board';
import { InvalidLockOptionsError } from '../../lib/errors/invalid-lock-options.error';
import { LEADER_KEY_PREFIX } from '../../lib/leadership/leader-key';
import { FaultProxy, passThrough, proxiedUri, proxyTarget } from '../support/fault-proxy';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { HTTP_ADAPTERS, lockModule } from '../nest/support/nest-apps';
import { EventsGate, listeningApp, OperatorHeaderGuard, readEvents } from './board-app';
import { watchBoardLog, type StreamEvent } from './board-app';

jest.setTimeout(60_000);

/** A JSON reply, as the test reads it. */
const readJson = (response: Response): Promise<any> => response.json();

describe('MongoLockBoardModule.forRoot', () => {
  it('refuses allowRelease without a guard, saying why', () => {
    expect(() => MongoLockBoardModule.forRoot({ allowRelease: true })).toThrow(
      InvalidLockOptionsError,
    );
    expect(() => MongoLockBoardModule.forRoot({ allowRelease: true })).toThrow(/needs a guard/);
  });

  // A misspelt guard would serve the board to everyone.
  const denyAll = { canActivate: () => false };
  it.each([
    [{ gaurd: denyAll }, /gaurd is not an option \(did you mean guard\?\)/],
    [{ guards: [denyAll] }, /guards is not an option \(did you mean guard\?\)/],
    [{ guard: denyAll, allowRelease: 'true' }, /allowRelease must be true or false/],
    [[], /options must be an object/],
    [{ guard: () => false }, /guard must be a guard class or an object with canActivate\(\)/],
    [{ guard: (() => false).bind(null) }, /guard must be a guard class/],
  ])('refuses the options %p', (options, message) => {
    expect(() => MongoLockBoardModule.forRoot(options as never)).toThrow(InvalidLockOptionsError);
    expect(() => MongoLockBoardModule.forRoot(options as never)).toThrow(message);
  });

  it('takes a guard class whose canActivate is a field (only an instance shows it)', () => {
    class FieldGuard {
      canActivate = () => true;
    }
    expect(MongoLockBoardModule.forRoot({ guard: FieldGuard }).controllers).toHaveLength(1);
  });

  it('takes null options as none', () => {
    expect(MongoLockBoardModule.forRoot(null as never).controllers).toHaveLength(1);
  });

  it.each(['', 'locks/:key', 'a b', '../x', '*', 'ops//locks'])('refuses the path %j', (path) => {
    expect(() => MongoLockBoardModule.forRoot({ path })).toThrow(/path must be/);
  });

  it.each([0, 999, 3_600_001, 1500.5, '60000'])('refuses eventStreamMaxMs %j', (value) => {
    expect(() => MongoLockBoardModule.forRoot({ eventStreamMaxMs: value as number })).toThrow(
      /eventStreamMaxMs must be an integer from 1000 to 3600000/,
    );
  });
});

/** Whether changes flow, as each `flow` event of the stream says. */
const flowStates = (events: StreamEvent[]): boolean[] =>
  events.filter((event) => event.type === 'flow').map((event) => JSON.parse(event.data).live);

/** A guard that lets nothing through. */
class DenyAllGuard implements CanActivate {
  canActivate(): boolean {
    return false;
  }
}

describe.each(HTTP_ADAPTERS)('the lock board over HTTP (%s)', (adapter) => {
  let mongo: TestMongo;
  let app: INestApplication;
  let url: string;
  let locks: LockService;
  let other: LockService;
  let raw: MongoClient;
  const get = (path: string, init?: RequestInit) => fetch(`${url}${path}`, init);
  const release = (key: string, headers: Record<string, string> = {}) =>
    get(`/locks/api/lock/release?key=${encodeURIComponent(key)}`, {
      method: 'POST',
      headers: { 'x-lock-board': 'release', ...headers },
    });
  /** Every owner token stored in the key's document (the lease's and every holder entry's). */
  /** The tokens of `key`'s entries in engine v2's collection: what the board must never show. */
  const ownerTokens = async (key: string): Promise<string[]> => {
    const doc = await raw
      .db(mongo.dbName)
      .collection<LineDocument>('locks_line')
      .findOne({ _id: key });
    return (doc?.line ?? []).map((entry) => entry.t);
  };

  beforeAll(async () => {
    mongo = await startTestMongo();
    ({ app, url } = await listeningApp(
      {
        imports: [
          lockModule(mongo, { holderId: `board-${adapter}` }),
          MongoLockBoardModule.forRoot({ guard: OperatorHeaderGuard, allowRelease: true }),
          MongoLockBoardModule.forRoot({ path: 'ops/readonly-locks' }),
          MongoLockBoardModule.forRoot({ path: 'ops/closed', guard: DenyAllGuard }),
          MongoLockBoardModule.forRoot({
            path: 'ops/short',
            guard: EventsGate,
            eventStreamMaxMs: 1_000,
          }),
        ],
      },
      adapter,
    ));
    locks = app.get(LockService);
    other = new LockService({ uri: mongo.uri, dbName: mongo.dbName, holderId: `other-${adapter}` });
    await other.start();
    raw = await MongoClient.connect(mongo.uri);
  });

  afterAll(async () => {
    await other?.close();
    await app?.close();
    await raw?.close();
    await mongo?.stop();
  });

  it('serves the page with its own strict CSP', async () => {
    const response = await get('/locks');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = response.headers.get('content-security-policy') ?? '';
    expect(csp).toMatch(/default-src 'none'/);
    expect(csp).toMatch(/script-src 'sha256-[A-Za-z0-9+/]+=*'/);
    expect(csp).toMatch(/connect-src 'self'/);
    expect(await response.text()).toMatch(/<script>/);
  });

  it('lists keys in order with a prefix, in pages (next via after)', async () => {
    const held = await Promise.all(
      ['page:c', 'page:a', 'page:b', 'pagex', 'dot.1', 'dotx1'].map((key) => locks.acquire(key)),
    );
    const first = await readJson(await get('/locks/api/locks?prefix=page:&limit=2'));
    expect(first.locks.map((lock: { key: string }) => lock.key)).toEqual(['page:a', 'page:b']);
    expect(first.next).toBe('page:b');
    const second = await readJson(await get(`/locks/api/locks?prefix=page:&after=page:b`));
    expect(second.locks.map((lock: { key: string }) => lock.key)).toEqual(['page:c']);
    expect(second.next).toBeNull();
    // The prefix is text, not a pattern: '.' matches a dot only.
    const dots = await readJson(await get('/locks/api/locks?prefix=dot.'));
    expect(dots.locks.map((lock: { key: string }) => lock.key)).toEqual(['dot.1']);
    await Promise.all(held.map((handle) => handle.release()));
  });

  it('answers next: null on a last page that is full', async () => {
    const held = await Promise.all(['full:a', 'full:b'].map((key) => locks.acquire(key)));
    const page = await readJson(await get('/locks/api/locks?prefix=full:&limit=2'));
    expect(page.locks.map((lock: { key: string }) => lock.key)).toEqual(['full:a', 'full:b']);
    expect(page.next).toBeNull();
    await Promise.all(held.map((handle) => handle.release()));
  });

  it.each(['.', '..'])('shows and frees the key %j (a path would lose it)', async (key) => {
    const handle = await locks.acquire(key);
    const one = await get(`/locks/api/lock?key=${encodeURIComponent(key)}`);
    expect(one.status).toBe(200);
    expect(await readJson(one)).toMatchObject({ key, held: true });
    const released = await release(key, { 'x-operator': 'ops' });
    expect(released.status).toBe(200);
    expect(await readJson(released)).toMatchObject({
      key,
      released: [{ fence: `${handle.fence}` }],
    });
    expect(handle.signal.aborted).toBe(true);
  });

  it('answers 400 to a key route without a key, or with it twice', async () => {
    for (const query of ['', '?key=', '?key=a&key=b']) {
      expect((await get(`/locks/api/lock${query}`)).status).toBe(400);
      const released = await get(`/locks/api/lock/release${query}`, {
        method: 'POST',
        headers: { 'x-lock-board': 'release', 'x-operator': 'ops' },
      });
      expect(released.status).toBe(400);
    }
  });

  it('shows one key with mode, holder, fence, lease, scope and leaders', async () => {
    const handle = await locks.acquire('orders:7', { scope: 'session:42', ttlMs: 30_000 });
    const response = await get('/locks/api/lock?key=orders%3A7');
    expect(response.status).toBe(200);
    const lock = await readJson(response);
    expect(lock).toMatchObject({ key: 'orders:7', held: true, mode: 'exclusive', waiting: 0 });
    expect(lock.leaderOf).toBeNull();
    expect(lock.holders).toEqual([
      {
        holderId: `board-${adapter}`,
        fence: handle.fence.toString(),
        weight: 1,
        remainingMs: expect.any(Number),
        scope: 'session:42',
      },
    ]);
    expect(lock.holders[0].remainingMs).toBeGreaterThan(20_000);
    const leader = await locks.acquire(`${LEADER_KEY_PREFIX}billing`);
    const page = (await readJson(await get('/locks/api/locks?prefix=nestjs-mongo-lock:'))) as {
      locks: unknown[];
    };
    expect(page.locks[0]).toMatchObject({ leaderOf: 'billing', held: true });
    await Promise.all([handle.release(), leader.release()]);
  });

  it('answers 404 for a key without a document', async () => {
    expect((await get('/locks/api/lock?key=never-seen')).status).toBe(404);
  });

  it.each([
    ['limit=0'],
    ['limit=101'],
    ['limit=abc'],
    ['limit=1.5'],
    ['limit=-1'],
    ['limit=1&limit=2'],
    ['prefix=a&prefix=b'],
    ['after=%00'],
    [`prefix=${'x'.repeat(600)}`],
  ])('answers 400 to the query %s', async (query) => {
    const response = await get(`/locks/api/locks?${query}`);
    expect(response.status).toBe(400);
  });

  it.each([['limit[$gt]=1'], ['prefix[$ne]=x'], ['after[$gt]=']])(
    'never turns %s into an operator: 400, or a parameter of that name, ignored',
    async (query) => {
      const response = await get(`/locks/api/locks?${query}`);
      if (response.status === 400) return; // a parser that nests brackets: an object, refused
      expect(response.status).toBe(200);
      expect(await readJson(response)).toEqual(await readJson(await get('/locks/api/locks')));
    },
  );

  it('reads a prefix of bad UTF-8 as text that no key starts with', async () => {
    const response = await get('/locks/api/locks?prefix=%ED%A0%80');
    expect([200, 400]).toContain(response.status);
    if (response.status === 200) {
      expect(((await readJson(response)) as { locks: unknown[] }).locks).toEqual([]);
    }
  });

  it('reads bad UTF-8 in the query as U+FFFD, never as the escapes typed (a key of that name)', async () => {
    const typed = await locks.acquire('%E0%A4');
    try {
      const bad = await get('/locks/api/lock?key=%E0%A4');
      expect(bad.status).toBe(404);
      expect((await readJson(bad)).message).toBe('No lock document for key "\uFFFD"');
      const escaped = await get(`/locks/api/lock?key=${encodeURIComponent('%E0%A4')}`);
      expect((await readJson(escaped)).key).toBe('%E0%A4');
      const list = await get('/locks/api/locks?prefix=%E0%A4');
      expect((await readJson(list)).locks).toEqual([]);
    } finally {
      await typed.release();
    }
  });

  it.each([
    ['a NUL', 'a%00b', [400]],
    ['over 512 bytes', 'k'.repeat(513), [400]],
    // Bad UTF-8 in a query is read as U+FFFD (a key nobody holds) or refused.
    ['a lone surrogate', '%ED%A0%80', [400, 404]],
    ['an encoded lone surrogate', '%F0%9F', [400, 404]],
    ['a bad escape', '%E0%A4%A', [400, 404]],
  ])('answers 4xx, never 5xx, to a key with %s', async (_, key, statuses) => {
    expect(statuses).toContain((await get(`/locks/api/lock?key=${key}`)).status);
    const released = await get(`/locks/api/lock/release?key=${key}`, {
      method: 'POST',
      headers: { 'x-lock-board': 'release', 'x-operator': 'ops' },
    });
    // Nobody held it: released from nobody.
    expect(statuses.map((status) => (status === 404 ? 200 : status))).toContain(released.status);
    if (released.status === 200) expect((await readJson(released)).released).toEqual([]);
  });

  it('never shows an owner token, exclusive or shared', async () => {
    const exclusive = await locks.acquire('secret:x');
    const sharedA = await locks.acquire('secret:s', { mode: 'shared' });
    const sharedB = await other.acquire('secret:s', { mode: 'shared' });
    const tokens = [...(await ownerTokens('secret:x')), ...(await ownerTokens('secret:s'))];
    expect(tokens).toHaveLength(3);
    const texts = await Promise.all(
      [
        '/locks/api/locks?prefix=secret:',
        '/locks/api/lock?key=secret:x',
        '/locks/api/lock?key=secret:s',
      ].map(async (path) => (await get(path)).text()),
    );
    for (const text of texts) for (const token of tokens) expect(text).not.toContain(token);
    expect(JSON.parse(texts[2]).holders).toHaveLength(2);
    await Promise.all([exclusive.release(), sharedA.release(), sharedB.release()]);
  });

  it('refuses a release without the guard (403) or its header (403)', async () => {
    const handle = await locks.acquire('guarded:1');
    expect((await release('guarded:1')).status).toBe(403);
    const unmarked = await get('/locks/api/lock/release?key=guarded%3A1', {
      method: 'POST',
      headers: { 'x-operator': 'ops' },
    });
    expect(unmarked.status).toBe(403);
    expect(handle.signal.aborted).toBe(false);
    expect((await locks.inspect('guarded:1'))?.held).toBe(true);
    await handle.release();
  });

  it('guards every route, reads and the event stream included', async () => {
    for (const path of ['', '/api/locks', '/api/lock?key=k', '/api/events']) {
      expect((await get(`/ops/closed${path}`)).status).toBe(403);
    }
  });

  it('refuses a release sent from another site, whatever CORS lets through (403)', async () => {
    const handle = await locks.acquire('cross-site:1');
    const response = await release('cross-site:1', {
      'x-operator': 'ops',
      'sec-fetch-site': 'cross-site',
    });
    expect(response.status).toBe(403);
    expect(handle.signal.aborted).toBe(false);
    await handle.release();
  });

  it('has no release route on a read-only board (404)', async () => {
    const handle = await locks.acquire('readonly:1');
    const response = await get('/ops/readonly-locks/api/lock/release?key=readonly%3A1', {
      method: 'POST',
      headers: { 'x-lock-board': 'release', 'x-operator': 'ops' },
    });
    expect(response.status).toBe(404);
    expect((await get('/ops/readonly-locks/api/lock?key=readonly%3A1')).status).toBe(200);
    await handle.release();
  });

  it('frees a key with the guard: local holder told at once, remote at its renewal, logged', async () => {
    const log = watchBoardLog();
    try {
      const local = await locks.acquire('stuck:local');
      const response = await release('stuck:local', { 'x-operator': 'alice' });
      expect(response.status).toBe(200);
      expect(await readJson(response)).toEqual({
        key: 'stuck:local',
        released: [
          {
            holderId: `board-${adapter}`,
            fence: local.fence.toString(),
            weight: 1,
            remainingMs: expect.any(Number),
          },
        ],
      });
      expect(local.signal.aborted).toBe(true);
      expect(local.signal.reason).toBeInstanceOf(LockLostError);
      expect((await locks.inspect('stuck:local'))?.held).toBe(false);

      const remote = await other.acquire('stuck:remote');
      const freed = (await readJson(await release('stuck:remote', { 'x-operator': 'alice' }))) as {
        released: unknown[];
      };
      expect(freed.released).toEqual([
        expect.objectContaining({ holderId: `other-${adapter}`, fence: remote.fence.toString() }),
      ]);
      await expect(remote.extend()).rejects.toBeInstanceOf(LockLostError);
      // The next holder gets a larger fence.
      const next = await locks.acquire('stuck:remote', { timeoutMs: 5_000 });
      expect(next.fence).toBeGreaterThan(remote.fence);
      await next.release();

      expect(log.lines).toEqual([
        expect.stringMatching(/"stuck:local" asked by "alice": board-\w+ \(fence \d+\)/),
        expect.stringMatching(/"stuck:remote" asked by "alice": other-\w+ \(fence \d+\)/),
      ]);
    } finally {
      log.restore();
    }
  });

  it('streams an event (fences as strings) when a lock is taken', async () => {
    const abort = new AbortController();
    try {
      const response = await get('/locks/api/events', { signal: abort.signal });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const reader = response.body!.getReader();
      const decoder = new TextDecoder();
      let text = '';
      // The stream opens on subscription; take the lock until the event comes through.
      const taking = (async () => {
        await new Promise((resolve) => setTimeout(resolve, 300));
        return locks.acquire('sse:1');
      })();
      while (!/"key":"sse:1"/.test(text)) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
      const handle = await taking;
      const line = text.split('\n').find((each) => each.includes('"key":"sse:1"'))!;
      const event = JSON.parse(line.replace(/^data: ?/, ''));
      expect(event).toMatchObject({
        type: 'acquired',
        key: 'sse:1',
        fence: handle.fence.toString(),
      });
      await handle.release();
    } finally {
      abort.abort();
    }
  });

  it('says when changes reach the stream (flow live: true once it is open)', async () => {
    const response = await get('/locks/api/events', { signal: AbortSignal.timeout(10_000) });
    const { events } = await readEvents(response, (all) => flowStates(all).includes(true));
    // Never a false "not live" while this connection's change stream opens.
    expect(flowStates(events)).toEqual([true]);
    expect(locks.diagnostics.eventsFlowing).toBe(true);
  });

  it('ends a connection after eventStreamMaxMs, so that the guard is asked again', async () => {
    const started = Date.now();
    const response = await get('/ops/short/api/events', { signal: AbortSignal.timeout(10_000) });
    expect(response.status).toBe(200);
    const { events, ended } = await readEvents(response, () => false);
    expect(ended).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(events.at(-1)).toEqual({ type: 'reconnect', data: '{}' });
    EventsGate.mode = 'refuse';
    try {
      const again = await get('/ops/short/api/events');
      expect(again.status).toBe(403);
      await again.body?.cancel();
    } finally {
      EventsGate.mode = 'open';
    }
  });

  it("says changes do not flow with changeStreams: 'off' (the page then only refreshes)", async () => {
    const polling = await listeningApp(
      {
        imports: [
          lockModule(mongo, { holderId: `board-off-${adapter}`, changeStreams: 'off' }),
          MongoLockBoardModule.forRoot({ eventStreamMaxMs: 4_000 }),
        ],
      },
      adapter,
    );
    try {
      const response = await fetch(`${polling.url}/locks/api/events`, {
        signal: AbortSignal.timeout(10_000),
      });
      const { events, ended } = await readEvents(response, () => false);
      expect(ended).toBe(true);
      expect(flowStates(events)).toEqual([false]);
      expect(polling.app.get(LockService).diagnostics.eventsFlowing).toBe(false);
    } finally {
      await polling.app.close();
    }
  });

  it('ends its event streams when the app closes, long before eventStreamMaxMs', async () => {
    const closing = await listeningApp(
      {
        imports: [
          lockModule(mongo, { holderId: `board-closing-${adapter}` }),
          MongoLockBoardModule.forRoot({ eventStreamMaxMs: 3_600_000 }),
        ],
      },
      adapter,
    );
    // Unended 20 s after the start, the read fails (the stream would last an hour).
    const response = await fetch(`${closing.url}/locks/api/events`, {
      signal: AbortSignal.timeout(20_000),
    });
    let closed: Promise<void> | undefined;
    const { events, ended } = await readEvents(response, (all) => {
      if (!closed && flowStates(all).length > 0) closed = closing.app.close();
      return false;
    });
    expect(ended).toBe(true);
    await closed;
    expect(events.at(-1)).toEqual({ type: 'reconnect', data: '{}' });
  });

  it('refuses at start-up a guard class whose instances cannot activate (Nest 10 would skip it)', async () => {
    class NotAGuard {}
    function denyAll() {
      return false;
    }
    for (const guard of [NotAGuard, denyAll]) {
      const board = MongoLockBoardModule.forRoot({ guard: guard as never, allowRelease: true });
      const outcome = await listeningApp({ imports: [lockModule(mongo), board] }, adapter).then(
        ({ app }) => app.close().then(() => 'started'),
        (error: unknown) => error,
      );
      expect(outcome).toBeInstanceOf(InvalidLockOptionsError);
      expect((outcome as Error).message).toBe(
        'MongoLockBoardModule.forRoot: guard must be a guard class or an object with canActivate()',
      );
    }
  });

  it("does not hold up the app's close on a browser's keep-alive connection", async () => {
    const closing = await listeningApp(
      { imports: [lockModule(mongo), MongoLockBoardModule.forRoot()] },
      adapter,
    );
    // A connection idle at shutdown is closed at once; one whose stream ends during shutdown
    // would stay open (and the close wait) until this timeout, unless the board closes it.
    const server = closing.app.getHttpServer() as Server;
    server.keepAliveTimeout = 600_000;
    const agent = new Agent({ keepAlive: true });
    try {
      const streaming = new Promise<void>((resolve, reject) => {
        const { port } = server.address() as AddressInfo;
        httpGet({ host: '127.0.0.1', port, path: '/locks/api/events', agent }, (response) => {
          response.once('data', () => resolve());
        }).once('error', reject);
      });
      await streaming;
      const hung = sleep(20_000, 'hung', { ref: false });
      const closed = closing.app.close().then(() => 'closed');
      await expect(Promise.race([closed, hung])).resolves.toBe('closed');
    } finally {
      agent.destroy();
    }
  });
});

/** A port nothing listens on (taken, then closed). */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe.each(HTTP_ADAPTERS)('the lock board with MongoDB unreachable (%s)', (adapter) => {
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    const port = await deadPort();
    ({ app, url } = await listeningApp(
      {
        imports: [
          MongoLockModule.forRoot({
            uri: `mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=500&directConnection=true`,
            dbName: 'board-unreachable',
            enabled: false,
            operationTimeoutMs: 1_000,
          }),
          MongoLockBoardModule.forRoot(),
        ],
      },
      adapter,
    ));
  });

  afterAll(async () => {
    await app?.close();
  });

  it('answers 503 to the list and to the event stream, before any event', async () => {
    expect((await fetch(`${url}/locks/api/locks`)).status).toBe(503);
    const events = await fetch(`${url}/locks/api/events`, { signal: AbortSignal.timeout(15_000) });
    expect(events.status).toBe(503);
    expect(events.headers.get('content-type')).not.toMatch(/event-stream/);
    await events.body?.cancel();
  });
});

describe.each(HTTP_ADAPTERS)(
  'the lock board when MongoDB goes away after the start (%s)',
  (adapter) => {
    let mongo: TestMongo;
    let proxy: FaultProxy;
    let app: INestApplication;
    let url: string;

    beforeAll(async () => {
      mongo = await startTestMongo();
      proxy = new FaultProxy(proxyTarget(mongo.uri));
      await proxy.start();
      ({ app, url } = await listeningApp(
        {
          imports: [
            MongoLockModule.forRoot({
              uri: proxiedUri(mongo.uri, proxy.port),
              dbName: mongo.dbName,
              operationTimeoutMs: 1_000,
            }),
            MongoLockBoardModule.forRoot(),
          ],
        },
        adapter,
      ));
    });

    afterAll(async () => {
      proxy?.setMode(passThrough);
      await app?.close();
      await proxy?.stop();
      await mongo?.stop();
    });

    it('answers the event stream 200 and says changes do not flow, then that they do again', async () => {
      proxy.setMode({ blackHole: 'drop' });
      expect((await fetch(`${url}/locks/api/locks`)).status).toBe(503);
      const away = await fetch(`${url}/locks/api/events`, { signal: AbortSignal.timeout(15_000) });
      expect(away.status).toBe(200);
      const { events } = await readEvents(away, (all) => flowStates(all).length > 0);
      expect(flowStates(events)).toEqual([false]);
      proxy.setMode(passThrough);
      const back = await fetch(`${url}/locks/api/events`, { signal: AbortSignal.timeout(30_000) });
      const { events: later } = await readEvents(back, (all) => flowStates(all).includes(true));
      expect(flowStates(later).at(-1)).toBe(true);
    });
  },
);
