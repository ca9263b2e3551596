import 'reflect-metadata';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Controller, Get, Module, Param, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MongoClient } from 'mongodb';
import { Locked, MongoLockModule } from '../../lib';
import { round, summarize, type LatencySummary } from '../support/stats';

@Controller()
class OverheadController {
  @Get('plain/:id')
  plain(@Param('id') id: string): { id: string } {
    return { id };
  }

  @Get('locked/:id')
  @Locked('bench-http:{params.id}')
  locked(@Param('id') id: string): { id: string } {
    return { id };
  }
}

export interface HttpOverheadResult {
  requests: number;
  plain: LatencySummary;
  locked: LatencySummary;
  /**
   * A `ping` from this process, taken between the requests: the round trip the added latency
   * is counted in (the app, its driver and the HTTP client share this process's event loop).
   */
  ping: LatencySummary;
  /** What the decorator adds at the median: ideally one acquire and one release round trip. */
  addedP50Ms: number;
  addedP99Ms: number;
}

async function timedPing(client: MongoClient): Promise<number> {
  const sentAt = performance.now();
  await client.db('admin').command({ ping: 1 });
  return performance.now() - sentAt;
}

function get(agent: http.Agent, port: number, path: string): Promise<number> {
  const sentAt = performance.now();
  return new Promise((resolve, reject) => {
    const request = http.get({ host: '127.0.0.1', port, path, agent }, (response) => {
      response.resume();
      response.on('end', () =>
        response.statusCode === 200
          ? resolve(performance.now() - sentAt)
          : reject(new Error(`${path}: HTTP ${response.statusCode}`)),
      );
    });
    request.on('error', reject);
  });
}

/** The same handler with and without `@Locked`, requests interleaved so drift hits both alike. */
export async function measureHttpOverhead(
  uri: string,
  requests = 400,
): Promise<HttpOverheadResult> {
  @Module({
    imports: [MongoLockModule.forRoot({ uri, dbName: 'bench_http' })],
    controllers: [OverheadController],
  })
  class OverheadModule {}

  const app: INestApplication = await NestFactory.create(OverheadModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const pingClient = new MongoClient(uri);
  try {
    await pingClient.connect();
    const plain: number[] = [];
    const locked: number[] = [];
    const pings: number[] = [];
    for (let i = 0; i < 50; i++) {
      await get(agent, port, `/plain/${i}`);
      await get(agent, port, `/locked/${i}`);
      await timedPing(pingClient);
    }
    for (let i = 0; i < requests; i++) {
      plain.push(await get(agent, port, `/plain/${i % 50}`));
      locked.push(await get(agent, port, `/locked/${i % 50}`));
      pings.push(await timedPing(pingClient));
    }
    const plainSummary = summarize(plain);
    const lockedSummary = summarize(locked);
    return {
      requests,
      plain: plainSummary,
      locked: lockedSummary,
      ping: summarize(pings),
      addedP50Ms: round(lockedSummary.p50 - plainSummary.p50, 3),
      addedP99Ms: round(lockedSummary.p99 - plainSummary.p99, 3),
    };
  } finally {
    agent.destroy();
    await pingClient.close();
    await app.close();
  }
}
