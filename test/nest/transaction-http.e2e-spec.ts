// Locked transactions over HTTP when the commit fails after the handler has answered, or when the
// client leaves a stream: Express and Fastify.
import { Controller, Module, Param, Post, Res, Sse, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import type { MongoClient } from 'mongodb';
import { concatMap, from, interval, map, take } from 'rxjs';
import { type LockHandle, LockHandleParam, Locked, MongoLockModule, VersionETag } from '../../lib';
import { faultTools } from '../lock-service/adversarial/kit';
import { LockTestKit } from '../lock-service/lock-test-kit';

jest.setTimeout(60_000);

const outcomeUnknown = {
  failCommands: ['commitTransaction'],
  errorCode: 50,
  errorLabels: ['UnknownTransactionCommitResult'],
};

/** The collection the handlers write in their transactions; set before the app starts. */
let data: () => ReturnType<MongoClient['db']>;

const bumpVersion = async (id: string, lock: LockHandle) =>
  data()
    .collection<{ _id: string; version: number }>('tx_versions')
    .findOneAndUpdate(
      { _id: id },
      { $inc: { version: 1 } },
      { session: lock.session, returnDocument: 'after' },
    );

@Controller('tx')
class TransactionsController {
  @Post(':id/own-response')
  @Locked('tx-own:{params.id}', { transaction: true })
  ownResponse(@Param('id') id: string, @Res() response: { status(code: number): unknown }) {
    const reply = response as unknown as {
      status(code: number): { json?(body: unknown): void; send(body: unknown): void };
    };
    const sent = reply.status(200);
    // Express's response has json(); Fastify's reply sends objects as JSON.
    if (sent.json) sent.json({ id });
    else sent.send({ id });
  }

  @Sse(':id/events')
  @Locked('tx-sse:{params.id}', { transaction: true })
  events() {
    return interval(20).pipe(
      take(3),
      map((i) => ({ data: { i } })),
    );
  }

  @Sse(':id/steps')
  @Locked('tx-steps:{params.id}', { transaction: true })
  steps(@Param('id') id: string, @LockHandleParam() lock: LockHandle) {
    return interval(100).pipe(
      take(5),
      concatMap((step) =>
        from(
          data()
            .collection('tx_steps')
            .insertOne({ feed: id, step }, { session: lock.session })
            .then(() => ({ data: { step } })),
        ),
      ),
    );
  }

  @Post(':id/etag-outside')
  @Locked('tx-etag:{params.id}', { transaction: true })
  @VersionETag('version')
  etagOutside(@Param('id') id: string, @LockHandleParam() lock: LockHandle) {
    return bumpVersion(id, lock);
  }

  @Post(':id/etag-inside')
  @VersionETag('version')
  @Locked('tx-etag:{params.id}', { transaction: true })
  etagInside(@Param('id') id: string, @LockHandleParam() lock: LockHandle) {
    return bumpVersion(id, lock);
  }
}

describe.each(['express', 'fastify'] as const)('locked transactions over HTTP (%s)', (platform) => {
  let app: INestApplication;
  let url: string;
  // Before the kit's own: the app closes while its client is open, so that a commit still on
  // its way (after a handler's own answer) ends and its lock is released, not left to the
  // shutdown grace period.
  afterEach(async () => {
    await app?.close();
  });
  const kit = LockTestKit.forSuite();
  const { failPoint } = faultTools(kit);

  // A new app for each test: the kit closes its clients after each.
  beforeEach(async () => {
    const client = await kit.client();
    data = () => client.db(kit.mongo.dbName);
    @Module({
      imports: [MongoLockModule.forRoot(kit.options({ client }))],
      controllers: [TransactionsController],
    })
    class AppModule {}
    app =
      platform === 'fastify'
        ? await NestFactory.create(AppModule, new FastifyAdapter(), {
            logger: false,
            forceCloseConnections: true,
          })
        : await NestFactory.create(AppModule, { logger: false, forceCloseConnections: true });
    await app.listen(0, '127.0.0.1');
    url = await app.getUrl();
  });

  /** Arms `data` for one command and runs `work`; the fault must have fired. */
  async function withFaultOnce<T>(data: Record<string, unknown>, work: () => Promise<T>) {
    const before = await failPoint({ times: 1 }, data);
    const result = await work();
    expect(await failPoint('off')).toBe(before + 1);
    return result;
  }

  it('a stream whose commit fails ends with its error event', async () => {
    const text = await withFaultOnce(outcomeUnknown, async () => {
      const response = await fetch(`${url}/tx/1/events`, { signal: AbortSignal.timeout(5_000) });
      return response.text();
    });
    expect(text).toContain('data: {"i":2}');
    expect(text).toMatch(/event: error[\s\S]*unavailable/);
  });

  /** Waits until `key` is no longer held (its locked work, commit included, has ended). */
  async function untilFree(key: string) {
    const locks = await kit.service();
    for (let i = 0; i < 100 && (await locks.inspect(key))?.held !== false; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect((await locks.inspect(key))?.held).toBe(false);
  }

  it('a handler that answered by itself keeps its answer, and the app keeps serving', async () => {
    const response = await withFaultOnce(outcomeUnknown, async () => {
      const answer = await fetch(`${url}/tx/2/own-response`, { method: 'POST' });
      // The commit comes after the handler's own answer.
      await untilFree('tx-own:2');
      return answer;
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ id: '2' });
    const next = await fetch(`${url}/tx/3/own-response`, { method: 'POST' });
    expect(next.status).toBe(200);
  });

  it('a stream the client leaves is aborted, not committed', async () => {
    const feed = `feed${platform}`;
    const abort = new AbortController();
    const response = await fetch(`${url}/tx/${feed}/steps`, { signal: abort.signal });
    const reader = response.body!.getReader();
    let seen = '';
    while ((seen.match(/data:/g) ?? []).length < 2) {
      const chunk = await reader.read();
      if (chunk.done) throw new Error(`the stream ended early: ${seen}`);
      seen += new TextDecoder().decode(chunk.value);
    }
    abort.abort();
    // The lock is released once the transaction has ended.
    await untilFree(`tx-steps:${feed}`);
    expect(await data().collection('tx_steps').countDocuments({ feed })).toBe(0);
  });

  it.each(['etag-outside', 'etag-inside'])(
    '%s: a commit that fails answers without the version ETag it did not write',
    async (route) => {
      const id = `${route.replace('-', '')}${platform}`;
      await data()
        .collection<{ _id: string; version: number }>('tx_versions')
        .insertOne({ _id: id, version: 7 });
      const response = await withFaultOnce(outcomeUnknown, () =>
        fetch(`${url}/tx/${id}/${route}`, { method: 'POST' }),
      );
      expect(response.status).toBe(503);
      expect(response.headers.get('etag') ?? '').not.toBe('"8"');
      // Committed without the fault, it carries it.
      const committed = await fetch(`${url}/tx/${id}/${route}`, { method: 'POST' });
      expect(committed.status).toBe(201);
      expect(committed.headers.get('etag')).toBe('"8"');
    },
  );
});
