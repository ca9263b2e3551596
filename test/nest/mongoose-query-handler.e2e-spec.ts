// A handler returning a Mongoose query without awaiting it (common in Nest code): Nest awaits the
// query, which runs it once. With @Locked, the query must still run once.
import { Controller, HttpCode, Param, Post } from '@nestjs/common';
import type { INestApplication } from '@nestjs/common';
import mongoose from 'mongoose';
import type { Connection, Model } from 'mongoose';
import request from 'supertest';
import { Locked } from '../../lib';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { HTTP_ADAPTERS, lockModule, startHttpApp } from './support/nest-apps';

jest.setTimeout(60_000);

interface Counter {
  _id: string;
  n: number;
}

let Counters: Model<Counter>;

@Controller('counters')
class CountersController {
  @Post('plain/:id')
  @HttpCode(200)
  plain(@Param('id') id: string) {
    return Counters.findOneAndUpdate({ _id: id }, { $inc: { n: 1 } }, { upsert: true, new: true });
  }

  @Post('locked/:id')
  @HttpCode(200)
  @Locked('counter:{params.id}')
  locked(@Param('id') id: string) {
    return Counters.findOneAndUpdate({ _id: id }, { $inc: { n: 1 } }, { upsert: true, new: true });
  }
}

describe.each(HTTP_ADAPTERS)('@Locked handler returning a Mongoose query (%s)', (adapter) => {
  let mongo: TestMongo;
  let connection: Connection;
  let app: INestApplication;
  const server = () => app.getHttpServer() as Parameters<typeof request>[0];

  beforeAll(async () => {
    mongo = await startTestMongo();
    connection = await mongoose.createConnection(mongo.uri, { dbName: mongo.dbName }).asPromise();
    Counters = connection.model<Counter>(
      `Counter_${adapter}`,
      new mongoose.Schema<Counter>({ _id: String, n: Number }),
      `counters_${adapter}`,
    );
    app = await startHttpApp(
      { imports: [lockModule(mongo)], controllers: [CountersController] },
      adapter,
    );
  });
  afterAll(async () => {
    await app?.close();
    await connection?.close();
    await mongo?.stop();
  });

  it('without @Locked: one request, one increment', async () => {
    const res = await request(server()).post('/counters/plain/a');
    expect(res.status).toBe(200);
    expect((await Counters.findById('a').lean())?.n).toBe(1);
  });

  it('with @Locked: one request, one increment, the query answered', async () => {
    const res = await request(server()).post('/counters/locked/b');
    expect({ status: res.status, body: res.body as unknown }).toMatchObject({
      status: 200,
      body: { _id: 'b', n: 1 },
    });
    expect((await Counters.findById('b').lean())?.n).toBe(1);
  });
});
