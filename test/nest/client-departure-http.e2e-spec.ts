// Clients that go away from @Locked routes, over a real HTTP server: Express and Fastify.
import {
  Controller,
  HttpCode,
  Module,
  Param,
  Post,
  Sse,
  UseInterceptors,
  type INestApplication,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { MongoClient } from 'mongodb';
import * as http2 from 'node:http2';
import { connect } from 'node:net';
import * as os from 'node:os';
import { request as httpRequest, type Server, type ServerResponse } from 'node:http';
import { interval, map } from 'rxjs';
import { Locked, LockService, MongoLockModule } from '../../lib';
import { describeWithFailPoints, faultTools } from '../lock-service/adversarial/kit';
import { LockTestKit } from '../lock-service/lock-test-kit';
import { RequestTimeoutInterceptor } from './fixtures/locked-http.fixture';
import { eventually, gate, HTTP_ADAPTERS } from './support/nest-apps';

jest.setTimeout(60_000);

/** What the handlers did, by request id. */
const calls = { started: [] as string[], finished: [] as string[] };
/** The handlers wait on this, so a test can look while they hold their lock. */
let hold: Promise<void> = Promise.resolve();

@Controller('departure')
class DepartureController {
  @Post('wait/:id')
  @HttpCode(200)
  @Locked('wait:{params.id}', { timeoutMs: 30_000 })
  async wait(@Param('id') id: string) {
    calls.started.push(id);
    await hold;
    calls.finished.push(id);
    return { ran: id };
  }

  @Post('tx/:id')
  @HttpCode(200)
  @Locked('tx:{params.id}', { transaction: true })
  transaction(@Param('id') id: string) {
    calls.started.push(id);
    return { ran: id };
  }

  @Sse('feed/:id')
  @Locked('feed:{params.id}', { timeoutMs: 0 })
  feed() {
    return interval(20).pipe(map((tick) => ({ data: { tick } })));
  }

  /** Takes the key of `/timed/slow/:id` at once or not at all. */
  @Post('quick/:id')
  @HttpCode(200)
  @Locked('slow:{params.id}', { timeoutMs: 0 })
  quick(@Param('id') id: string) {
    return { ran: id };
  }
}

/** A request timeout outside the lock: it stops listening to a handler that still runs. */
@Controller('timed')
@UseInterceptors(RequestTimeoutInterceptor)
class TimedController {
  @Post('slow/:id')
  @HttpCode(200)
  @Locked('slow:{params.id}')
  async slow(@Param('id') id: string) {
    calls.started.push(id);
    await hold;
    calls.finished.push(id);
    return { ran: id };
  }
}

/** A POST with a JSON body on its own connection; `leave()` closes it unanswered. */
function post(url: string, path: string, body: unknown = { note: 'a body the server reads' }) {
  const request = httpRequest(`${url}${path}`, {
    method: 'POST',
    agent: false,
    headers: { 'content-type': 'application/json' },
  });
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    request.on('response', (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
    });
    request.on('error', reject);
  });
  request.end(JSON.stringify(body));
  return {
    answer,
    leave: () => {
      answer.catch(() => undefined);
      request.destroy();
    },
  };
}

/** A POST as sent on a connection of its own making (two of them pipeline). */
function rawPost(path: string): string {
  return (
    `POST ${path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n` +
    'Content-Length: 2\r\n\r\n{}'
  );
}

/** The first event of a server-sent event stream, as sent. */
async function firstEvent(response: Response): Promise<string> {
  const reader = response.body!.getReader();
  let text = '';
  while (!text.includes('\n\n')) {
    const chunk = await reader.read();
    if (chunk.done) break;
    text += new TextDecoder().decode(chunk.value);
  }
  return text;
}

describe.each(HTTP_ADAPTERS)('clients leaving @Locked routes (%s)', (adapter) => {
  let app: INestApplication;
  let appClient: MongoClient;
  let url: string;
  let other: LockService;
  /** Settles when the server has seen the next response it sends close, and whether it finished. */
  let nextResponseClosed: () => Promise<boolean>;
  const appName = `departure-${adapter}`;
  // Before the kit's own: the app closes while the server is up.
  afterEach(async () => {
    await app?.close();
    await appClient?.close();
  });
  const kit = LockTestKit.forSuite();

  beforeEach(async () => {
    calls.started = [];
    calls.finished = [];
    hold = Promise.resolve();
    // `os` given: the driver's own import of it fails under Jest, and the handshake then lacks
    // the appName fail points match on.
    appClient = await MongoClient.connect(kit.mongo.uri, { appName, runtimeAdapters: { os } });
    @Module({
      imports: [MongoLockModule.forRoot(kit.options({ client: appClient, holderId: appName }))],
      controllers: [DepartureController, TimedController],
    })
    class AppModule {}
    const options = { logger: false as const, forceCloseConnections: true };
    app =
      adapter === 'fastify'
        ? await NestFactory.create(AppModule, new FastifyAdapter(), options)
        : await NestFactory.create(AppModule, options);
    await app.listen(0, '127.0.0.1');
    url = await app.getUrl();
    const server = app.getHttpServer() as Server;
    nextResponseClosed = () =>
      new Promise((resolve) =>
        server.once('request', (_request, response: ServerResponse) =>
          response.once('close', () => resolve(response.writableFinished)),
        ),
      );
    other = await kit.service({ holderId: 'other' });
  });

  it('a client that leaves while waiting for the lock: the handler never runs and its place in line is withdrawn', async () => {
    const held = await other.acquire('wait:1', { ttlMs: 30_000 });
    try {
      const leaving = post(url, '/departure/wait/1');
      await eventually(async () => (await other.inspect('wait:1'))?.waiting === 1);
      leaving.leave();
      await eventually(async () => (await other.inspect('wait:1'))?.waiting === 0);
    } finally {
      await held.release();
    }
    // The line is first served to the next request: nobody left waits ahead of it.
    const next = await post(url, '/departure/wait/1').answer;
    expect(next.status).toBe(200);
    expect(calls.started).toEqual(['1']);
    expect(await other.inspect('wait:1')).toMatchObject({ held: false, waiting: 0 });
  });

  it('pipelined requests whose client leaves while they wait: neither runs, both leave the line', async () => {
    const first = await other.acquire('wait:p1', { ttlMs: 30_000 });
    const second = await other.acquire('wait:p2', { ttlMs: 30_000 });
    try {
      const socket = connect(Number(new URL(url).port), '127.0.0.1');
      socket.on('error', () => undefined);
      // The second response waits for the first to be sent: it has no socket to close.
      socket.write(rawPost('/departure/wait/p1') + rawPost('/departure/wait/p2'));
      await eventually(async () => (await other.inspect('wait:p2'))?.waiting === 1);
      await eventually(async () => (await other.inspect('wait:p1'))?.waiting === 1);
      socket.destroy();
      await eventually(async () => (await other.inspect('wait:p1'))?.waiting === 0);
      await eventually(async () => (await other.inspect('wait:p2'))?.waiting === 0);
    } finally {
      await first.release();
      await second.release();
    }
    expect((await post(url, '/departure/wait/p2').answer).status).toBe(200);
    expect(calls.started).toEqual(['p2']);
  });

  it('a client that stays while waiting (its body read long before) is served once the lock is free', async () => {
    const held = await other.acquire('wait:2', { ttlMs: 30_000 });
    let staying: ReturnType<typeof post>;
    try {
      staying = post(url, '/departure/wait/2', { note: 'x'.repeat(10_000) });
      await eventually(async () => (await other.inspect('wait:2'))?.waiting === 1);
    } finally {
      await held.release();
    }
    expect((await staying.answer).status).toBe(200);
    expect(calls.finished).toEqual(['2']);
  });

  it('a client that leaves while the handler runs: the handler runs to its end under the lock', async () => {
    const handler = gate();
    hold = handler.opened;
    const closed = nextResponseClosed();
    const leaving = post(url, '/departure/wait/3');
    await eventually(() => calls.started.includes('3'));
    leaving.leave();
    expect(await closed).toBe(false);
    expect((await other.inspect('wait:3'))?.held).toBe(true);
    handler.open();
    await eventually(async () => (await other.inspect('wait:3'))?.held === false);
    expect(calls.finished).toEqual(['3']);
  });

  describeWithFailPoints('on a slow server', () => {
    const { failPoint, failPointFired } = faultTools(kit);
    /** The app's next lock write reaches MongoDB a second late: a release on its way. */
    const slowNextWrite = () =>
      failPoint(
        { times: 1 },
        { failCommands: ['findAndModify'], appName, blockConnection: true, blockTimeMS: 1_000 },
      );

    it('a client that leaves between the grant and the handler (a transaction’s first write): the handler never runs', async () => {
      // The join is granted; the write after it (the lease renewed before the transaction)
      // reaches MongoDB a second late.
      const fired = await failPoint(
        { skip: 1, times: 1 },
        { failCommands: ['findAndModify'], appName, blockConnection: true, blockTimeMS: 1_000 },
      );
      const closed = nextResponseClosed();
      const leaving = post(url, '/departure/tx/1');
      await failPointFired(fired + 1);
      leaving.leave();
      expect(await closed).toBe(false);
      await eventually(async () => (await other.inspect('tx:1'))?.held === false);
      expect(calls.started).toEqual([]);
      // Served to the next request.
      expect((await post(url, '/departure/tx/1').answer).status).toBe(200);
      expect(calls.started).toEqual(['1']);
    });

    it('a stream its client left: the next request on its key waits for its release, not 423', async () => {
      const leaving = new AbortController();
      const first = await fetch(`${url}/departure/feed/1`, { signal: leaving.signal });
      const reader = first.body!.getReader();
      await reader.read();
      expect((await other.inspect('feed:1'))?.held).toBe(true);
      const fired = await slowNextWrite();
      leaving.abort();
      await reader.cancel().catch(() => undefined);
      await failPointFired(fired + 1);
      const staying = new AbortController();
      const next = await fetch(`${url}/departure/feed/1`, { signal: staying.signal });
      try {
        // Nest answers an @Sse route 200 at once: a lock error would come as an error event.
        const event = await firstEvent(next);
        expect(event).not.toContain('event: error');
        expect(event).toContain('data: {"tick":0}');
      } finally {
        staying.abort();
      }
    });

    it('a handler outliving its request timeout: the next request on its key waits for its release, not 423', async () => {
      const handler = gate();
      hold = handler.opened;
      expect((await post(url, '/timed/slow/1').answer).status).toBe(408);
      expect(calls.finished).toEqual([]);
      const fired = await slowNextWrite();
      handler.open();
      await failPointFired(fired + 1);
      expect(calls.finished).toEqual(['1']);
      const next = await post(url, '/departure/quick/1').answer;
      expect(next.status).toBe(200);
    });
  });
});

describe('a client leaving a @Locked route over HTTP/2 (fastify)', () => {
  let app: INestApplication;
  let appClient: MongoClient;
  afterEach(async () => {
    await app?.close();
    await appClient?.close();
  });
  const kit = LockTestKit.forSuite();

  it('a stream reset while waiting: the handler never runs and its place in line is withdrawn', async () => {
    calls.started = [];
    appClient = await MongoClient.connect(kit.mongo.uri, { runtimeAdapters: { os } });
    @Module({
      imports: [MongoLockModule.forRoot(kit.options({ client: appClient, holderId: 'h2' }))],
      controllers: [DepartureController],
    })
    class AppModule {}
    const adapter = new FastifyAdapter({ http2: true } as ConstructorParameters<
      typeof FastifyAdapter
    >[0]);
    app = await NestFactory.create(AppModule, adapter, { logger: false });
    await app.listen(0, '127.0.0.1');
    const { port } = (app.getHttpServer() as { address(): { port: number } }).address();
    const other = await kit.service({ holderId: 'other' });
    const held = await other.acquire('wait:h2', { ttlMs: 30_000 });
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on('error', () => undefined);
    try {
      const stream = session.request({
        ':method': 'POST',
        ':path': '/departure/wait/h2',
        'content-type': 'application/json',
      });
      stream.on('error', () => undefined);
      stream.end('{}');
      await eventually(async () => (await other.inspect('wait:h2'))?.waiting === 1);
      // The session stays: only this request's stream ends.
      stream.close(http2.constants.NGHTTP2_CANCEL);
      await eventually(async () => (await other.inspect('wait:h2'))?.waiting === 0);
    } finally {
      session.destroy();
      await held.release();
    }
    const next = await other.acquire('wait:h2', { timeoutMs: 5_000 });
    await next.release();
    expect(calls.started).toEqual([]);
  });
});
