import 'reflect-metadata';
import {
  Body,
  Controller,
  Get,
  Module,
  Param,
  Post,
  Query,
  type INestApplication,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import type { AddressInfo } from 'node:net';
import { Locked, MongoLockModule } from '../../../lib';

/** How many times any locked handler ran: hostile input must never get this far. */
export const handlerRuns = { count: 0 };

/** One handler per place a key template can read from, as an application would write them. */
@Controller('hostile')
class HostileController {
  @Get('params/:id')
  @Locked('p:{params.id}')
  byParam(@Param('id') id: unknown): { ok: true } {
    handlerRuns.count++;
    void id;
    return { ok: true };
  }

  @Get('query')
  @Locked('q:{query.x}')
  byQuery(@Query('x') x: unknown): { ok: true } {
    handlerRuns.count++;
    void x;
    return { ok: true };
  }

  @Post('body')
  @Locked('b:{body.a.b}')
  byBody(@Body() body: unknown): { ok: true } {
    handlerRuns.count++;
    void body;
    return { ok: true };
  }

  @Get('header')
  @Locked('h:{headers.x-tenant}')
  byHeader(): { ok: true } {
    handlerRuns.count++;
    return { ok: true };
  }
}

export type HostileAdapter = 'express' | 'fastify';

/** A small real application over the library, listening on a random local port. */
export async function startHostileApp(
  uri: string,
  dbName: string,
  adapter: HostileAdapter,
): Promise<{ app: INestApplication; port: number }> {
  @Module({
    imports: [MongoLockModule.forRoot({ uri, dbName, holderId: `hostile-${adapter}` })],
    controllers: [HostileController],
  })
  class HostileModule {}

  const app =
    adapter === 'fastify'
      ? await NestFactory.create(HostileModule, new FastifyAdapter(), { logger: false })
      : await NestFactory.create(HostileModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  return { app, port };
}
