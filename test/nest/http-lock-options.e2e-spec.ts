import {
  Body,
  Controller,
  Get,
  HttpCode,
  type INestApplication,
  type INestApplicationContext,
  Param,
  Post,
  Sse,
} from '@nestjs/common';
import { type Observable, of } from 'rxjs';
import request from 'supertest';
import { Locked, LockService } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import {
  HTTP_ADAPTERS,
  lockModule,
  openLockCollection,
  startAppContext,
  startHttpApp,
} from './support/nest-apps';

jest.setTimeout(60_000);

@Controller('opts')
class LockOptionsController {
  static runs = 0;

  @Get('report/:id')
  @Locked('report:{params.id}', { onBusy: 'skip' })
  report(@Param('id') id: string) {
    LockOptionsController.runs += 1;
    return { ran: id };
  }

  @Post('report/:id')
  @Locked('report:{params.id}', { onBusy: 'skip' })
  trigger(@Param('id') id: string) {
    LockOptionsController.runs += 1;
    return { ran: id };
  }

  @Post('tick/:id')
  @HttpCode(200)
  @Locked('tick:{params.id}', { onBusy: 'skip', minHoldMs: 1_500 })
  tick(@Param('id') id: string) {
    LockOptionsController.runs += 1;
    return { ran: id };
  }

  @Sse('events/:id')
  @Locked('report:{params.id}', { onBusy: 'skip' })
  events(@Param('id') id: string): Observable<{ data: object }> {
    LockOptionsController.runs += 1;
    return of({ data: { ran: id } });
  }

  @Post('keyed')
  @HttpCode(200)
  @Locked('tenant:{body.tenant}:report:{body.report}')
  keyed(@Body() _body: unknown) {
    return { key: LockService.current()?.key };
  }
}

describe.each(HTTP_ADAPTERS)('@Locked options over HTTP (%s)', (adapter) => {
  let mongo: TestMongo;
  let app: INestApplication;
  let other: INestApplicationContext;
  let collection: Awaited<ReturnType<typeof openLockCollection>>;
  const server = () => app.getHttpServer() as Parameters<typeof request>[0];

  beforeAll(async () => {
    mongo = await startTestMongo();
    app = await startHttpApp(
      {
        imports: [lockModule(mongo, { holderId: `http-${adapter}` })],
        controllers: [LockOptionsController],
      },
      adapter,
    );
    other = await startAppContext({ imports: [lockModule(mongo, { holderId: 'other' })] });
    collection = await openLockCollection(mongo);
  });

  afterAll(async () => {
    await collection?.close();
    await other?.close();
    await app?.close();
    await mongo?.stop();
  });

  describe("onBusy: 'skip'", () => {
    it.each([
      ['get', 200],
      ['post', 201],
    ] as const)(
      '%s: a busy lock answers the route’s status with an empty body; the handler does not run',
      async (verb, status) => {
        const held = await other.get(LockService).acquire('report:1', { ttlMs: 30_000 });
        const runsBefore = LockOptionsController.runs;
        try {
          const response = await request(server())[verb]('/opts/report/1').expect(status);
          expect(response.text).toBe('');
          expect(response.headers['retry-after']).toBeUndefined();
          expect(LockOptionsController.runs).toBe(runsBefore);
        } finally {
          await held.release();
        }
        const response = await request(server())[verb]('/opts/report/1').expect(status);
        expect(response.body).toEqual({ ran: '1' });
        expect(LockOptionsController.runs).toBe(runsBefore + 1);
      },
    );

    it('@Sse: a busy lock ends the stream without an event (no id a browser would keep)', async () => {
      const held = await other.get(LockService).acquire('report:2', { ttlMs: 30_000 });
      const runsBefore = LockOptionsController.runs;
      try {
        const response = await request(server()).get('/opts/events/2').expect(200);
        expect(response.headers['content-type']).toMatch(/^text\/event-stream/);
        // Nest opens every stream with a blank line; an event would add `id:` and `data:`.
        expect(response.text.trim()).toBe('');
        expect(LockOptionsController.runs).toBe(runsBefore);
      } finally {
        await held.release();
      }
      const response = await request(server()).get('/opts/events/2').expect(200);
      expect(response.text.trim()).toBe('id: 1\ndata: {"ran":"2"}');
    });

    it('with minHoldMs: a second trigger within the period is skipped, the next one runs', async () => {
      await request(server()).post('/opts/tick/1').expect(200, { ran: '1' });
      const skipped = await request(server()).post('/opts/tick/1').expect(200);
      expect(skipped.text).toBe('');
      // Still in line after the handler: its lease runs out instead of being released.
      const document = await collection.locks.findOne({ _id: 'tick:1' });
      expect(document?.line?.map((entry) => entry.h)).toEqual([`http-${adapter}`]);
      await new Promise((resolve) => setTimeout(resolve, 1_600));
      await request(server()).post('/opts/tick/1').expect(200, { ran: '1' });
    });
  });

  describe('400 Bad Request for a key that cannot be built', () => {
    it.each<[string, object, RegExp]>([
      ['a missing value', { tenant: 't1' }, /\{body\.report\} has no value/],
      [
        'an operator object',
        { tenant: 't1', report: { $gt: '' } },
        /\{body\.report\} is of type object/,
      ],
      ['an array', { tenant: ['t1'], report: 'x' }, /\{body\.tenant\} is an array/],
      ['a NUL character', { tenant: 't\u00001', report: 'x' }, /NUL/],
      ['a key too long', { tenant: 'y'.repeat(600), report: 'x' }, /limit is 512/],
    ])(
      '%s: Nest’s { statusCode, message, error } body, nothing written',
      async (_label, body, message) => {
        const response = await request(server()).post('/opts/keyed').send(body).expect(400);
        expect(response.headers['content-type']).toMatch(/^application\/json/);
        expect(response.body).toEqual({
          statusCode: 400,
          message: expect.stringMatching(message) as unknown,
          error: 'Bad Request',
        });
        expect(await collection.locks.countDocuments({ _id: { $regex: '^tenant:' } })).toBe(0);
      },
    );

    it('escapes separators in values, so two requests never share a key', async () => {
      const first = await request(server())
        .post('/opts/keyed')
        .send({ tenant: 't1:report:q3', report: 'x' })
        .expect(200);
      const second = await request(server())
        .post('/opts/keyed')
        .send({ tenant: 't1', report: 'q3:report:x' })
        .expect(200);
      expect(first.body).toEqual({ key: 'tenant:t1%3Areport%3Aq3:report:x' });
      expect(second.body).toEqual({ key: 'tenant:t1:report:q3%3Areport%3Ax' });
    });
  });
});
