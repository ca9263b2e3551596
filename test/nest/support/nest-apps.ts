import type { INestApplication, INestApplicationContext, ModuleMetadata } from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { type Collection, MongoClient } from 'mongodb';
import { setTimeout as sleep } from 'node:timers/promises';
import { MongoLockModule, type MongoLockModuleOptions } from '../../../lib';
import type { LineDocument } from '../../../lib/store/line/line-document';
import type { TestMongo } from '../../support/mongo';

export type HttpAdapterName = 'express' | 'fastify';
export const HTTP_ADAPTERS: HttpAdapterName[] = ['express', 'fastify'];

/** `MongoLockModule.forRoot` on the fixture's server and the test file's own database. */
export function lockModule(
  mongo: TestMongo,
  options: Partial<MongoLockModuleOptions> & { isGlobal?: boolean } = {},
) {
  return MongoLockModule.forRoot({ uri: mongo.uri, dbName: mongo.dbName, ...options });
}

/** An initialised HTTP application on Express or Fastify, ready for supertest. */
export async function startHttpApp(
  metadata: ModuleMetadata,
  adapter: HttpAdapterName,
): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule(metadata).compile();
  const app =
    adapter === 'fastify'
      ? moduleRef.createNestApplication(new FastifyAdapter(), { logger: false })
      : moduleRef.createNestApplication({ logger: false });
  await app.init();
  if (adapter === 'fastify') {
    await (app.getHttpAdapter().getInstance() as { ready(): Promise<void> }).ready();
  }
  return app;
}

/** An initialised application without HTTP: another "instance" of the service. */
export async function startAppContext(metadata: ModuleMetadata): Promise<INestApplicationContext> {
  const moduleRef = await Test.createTestingModule(metadata).compile();
  moduleRef.useLogger(false);
  return moduleRef.init();
}

/** The lock collection of engine v2 (the default): `<collectionName>_line`, read raw. */
export async function openLockCollection(mongo: TestMongo, collectionName = 'locks') {
  const client = await MongoClient.connect(mongo.uri);
  const locks: Collection<LineDocument> = client
    .db(mongo.dbName)
    .collection(`${collectionName}_line`);
  return {
    locks,
    /** Documents with an entry of this holder id in line: held, waiting, or run out unreleased. */
    ownedBy: (holder: string) => locks.find({ 'line.h': holder }).toArray(),
    close: () => client.close(),
  };
}

/** Polls `check` until it returns true (for effects that arrive over a change stream). */
export async function eventually(check: () => Promise<boolean> | boolean, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(25);
  }
}

/** A promise with its resolve function, to hold a handler open while a test looks. */
export function gate<T = void>() {
  let open!: (value: T) => void;
  const opened = new Promise<T>((resolve) => (open = resolve));
  return { open, opened };
}
