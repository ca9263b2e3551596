import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { BSON, MongoClient } from 'mongodb';
import type { CommandStartedEvent, CommandSucceededEvent, Document } from 'mongodb';
import { LockService } from '../../lib/lock.service';
import type { MongoLockModuleOptions } from '../../lib/interfaces';
import { startTestMongo } from '../support/mongo';
import { TS_CHILD_FLAGS } from '@nestjs-mongo-lock/process-harness';
import type { TestMongo, TestMongoOptions } from '../support/mongo';

/**
 * One MongoDB per test file, a fresh lock collection per test, and cleanup of every
 * service, client and child process a test starts.
 */
export class LockTestKit {
  mongo!: TestMongo;
  collectionName = 'locks';
  private readonly services: LockService[] = [];
  private readonly clients: MongoClient[] = [];
  private readonly children: ChildProcess[] = [];
  private collectionSeq = 0;

  /** A kit for the enclosing `describe`: one server for it, a fresh collection per test. */
  static forSuite(options?: TestMongoOptions): LockTestKit {
    const kit = new LockTestKit();
    beforeAll(() => kit.start(options));
    beforeEach(() => kit.nextCollection());
    afterEach(() => kit.cleanup());
    afterAll(() => kit.stop());
    return kit;
  }

  async start(options?: TestMongoOptions): Promise<void> {
    this.mongo = await startTestMongo(options);
  }

  /** Call in beforeEach: later services of this test share a new collection. */
  nextCollection(): void {
    this.collectionSeq += 1;
    this.collectionName = `locks_${this.collectionSeq}`;
  }

  options(extra: Partial<MongoLockModuleOptions> = {}): MongoLockModuleOptions {
    return {
      ...(extra.client ? {} : { uri: this.mongo.uri }),
      dbName: this.mongo.dbName,
      collectionName: this.collectionName,
      ...extra,
    };
  }

  async service(extra: Partial<MongoLockModuleOptions> = {}): Promise<LockService> {
    const service = new LockService(this.options(extra));
    this.services.push(service);
    await service.start();
    return service;
  }

  async client(
    options: { monitorCommands?: boolean; maxPoolSize?: number } = {},
  ): Promise<MongoClient> {
    const client = new MongoClient(this.mongo.uri, options);
    this.clients.push(client);
    await client.connect();
    return client;
  }

  /** The raw lock documents (one per key, with its line), owner tokens included. */
  async rawLocks(): Promise<Record<string, unknown>[]> {
    const client = this.clients[0] ?? (await this.client());
    return client
      .db(this.mongo.dbName)
      .collection<Record<string, unknown>>(`${this.collectionName}_line`)
      .find({}, { sort: { _id: 1 } })
      .toArray();
  }

  /** Starts `test/support/lock-worker.ts` in a child process. */
  worker(args: Record<string, unknown>): LockWorker {
    const child = fork(join(__dirname, '../support/lock-worker.ts'), [], {
      execArgv: TS_CHILD_FLAGS,
      env: {
        ...process.env,
        LOCK_WORKER_ARGS: JSON.stringify({
          uri: this.mongo.uri,
          dbName: this.mongo.dbName,
          collectionName: this.collectionName,
          ...args,
        }),
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.children.push(child);
    return new LockWorker(child);
  }

  async cleanup(): Promise<void> {
    for (const child of this.children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
    await Promise.all(
      this.services.splice(0).map((service) => service.close().catch(() => undefined)),
    );
    await Promise.all(
      this.clients.splice(0).map((client) => client.close().catch(() => undefined)),
    );
  }

  async stop(): Promise<void> {
    await this.cleanup();
    await this.mongo?.stop();
  }
}

/** Messages from a worker, awaited by type. */
export class LockWorker {
  private readonly messages: Record<string, unknown>[] = [];
  private readonly waiting = new Set<() => void>();
  readonly exited: Promise<number | null>;

  constructor(readonly child: ChildProcess) {
    child.on('message', (message: Record<string, unknown>) => {
      this.messages.push(message);
      for (const wake of [...this.waiting]) wake();
    });
    this.exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  }

  send(message: Record<string, unknown>): void {
    this.child.send(message);
  }

  /** The next message of `type` (already received or future). */
  async next(type: string, timeoutMs = 30_000): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const index = this.messages.findIndex((message) => message.type === type);
      if (index >= 0) return this.messages.splice(index, 1)[0];
      const error = this.messages.find((message) => message.type === 'error');
      if (error) throw new Error(`worker failed: ${String(error.message)}`);
      if (Date.now() > deadline) throw new Error(`no '${type}' message from worker`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, 100);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.waiting.add(done);
      });
    }
  }
}

/** Counts commands sent by a monitored client, by name. */
export function countCommands(client: MongoClient): {
  names: string[];
  /** Each command's size in BSON bytes, in the order of `names`. */
  sizes: number[];
  reset(): void;
} {
  const names: string[] = [];
  const sizes: number[] = [];
  client.on('commandStarted', (event: CommandStartedEvent) => {
    if (!['hello', 'isMaster', 'ismaster', 'ping'].includes(event.commandName)) {
      names.push(event.commandName);
      sizes.push(BSON.calculateObjectSize(event.command));
    }
  });
  return { names, sizes, reset: () => void (names.splice(0), sizes.splice(0)) };
}

/**
 * Resolves once `client` (made with `monitorCommands: true`) has an answer to a command that
 * `watch` picked as it started; `heard` is told of every other answer meanwhile.
 */
export function answerTo(
  client: MongoClient,
  watch: (event: CommandStartedEvent) => boolean,
  heard?: (event: CommandSucceededEvent) => void,
): Promise<void> {
  return new Promise((resolve) => {
    const watched = new Set<number>();
    const started = (event: CommandStartedEvent) => {
      if (watch(event)) watched.add(event.requestId);
    };
    const succeeded = (event: CommandSucceededEvent) => {
      if (!watched.has(event.requestId)) return heard?.(event);
      client.off('commandStarted', started);
      client.off('commandSucceeded', succeeded);
      resolve();
    };
    client.on('commandStarted', started);
    client.on('commandSucceeded', succeeded);
  });
}

/**
 * Resolves once a `waitForRelease` through `client` (made with `monitorCommands: true`) listens
 * while the key is held: every change stream it opened on `collection` (an `aggregate` with
 * `$changeStream`) was answered, and then a look at `collection` (a `find`) sent after that was
 * answered too. A release written after this can end the wait only by waking it: the look saw
 * the key held. Call it before `waitForRelease`.
 */
export function listeningWhileHeld(client: MongoClient, collection: string): Promise<void> {
  const streams = new Set<number>();
  let answeredStreams = 0;
  const watch = (event: CommandStartedEvent) => {
    if (event.command[event.commandName] !== collection) return false;
    const pipeline = event.command.pipeline as Document[] | undefined;
    if (event.commandName === 'aggregate' && pipeline?.[0]?.$changeStream) {
      streams.add(event.requestId);
      return false;
    }
    // A look sent once every stream it opened is open.
    return event.commandName === 'find' && answeredStreams > 0 && answeredStreams === streams.size;
  };
  return answerTo(client, watch, (event) => {
    if (streams.has(event.requestId)) answeredStreams += 1;
  });
}

export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(20);
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** What `promise` settles to: its value, or the error it rejected with. */
export const settle = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    (value) => value,
    (error: unknown) => error,
  );
