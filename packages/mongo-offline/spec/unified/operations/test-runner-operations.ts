// The special operations of `object: testRunner`: fail points and assertions.
import type { ClientSession, Document, MongoClient } from 'mongodb';
import { scalarsEqual } from '../../matching/match';
import { createEntities } from '../entities';
import type { OperationCall, OperationFn } from './operation-call';

const TRANSACTION_STATES: Record<string, string[]> = {
  none: ['NO_TRANSACTION'],
  starting: ['STARTING_TRANSACTION'],
  in_progress: ['TRANSACTION_IN_PROGRESS'],
  committed: ['TRANSACTION_COMMITTED', 'TRANSACTION_COMMITTED_EMPTY'],
  aborted: ['TRANSACTION_ABORTED'],
};

function check(condition: boolean, message: string) {
  if (!condition) throw new Error(message);
}

function lastTwoLsids(call: OperationCall): [Document, Document] {
  const { recorder } = call.entities.get(call.args.client, 'client');
  const started = recorder.startedEvents();
  check(started.length >= 2, `needs two observed commands, saw ${started.length}`);
  const [a, b] = started.slice(-2).map((event) => event.command.lsid as Document);
  check(!!a && !!b, 'one of the last two commands has no lsid');
  return [a, b];
}

function sessionArg(call: OperationCall): ClientSession {
  return call.args.session as ClientSession;
}

async function collectionNames(call: OperationCall): Promise<string[]> {
  const db = call.ctx.internalClient.db(call.args.databaseName);
  const collections = await db.listCollections({}, { nameOnly: true }).toArray();
  return collections.map((c) => c.name);
}

async function indexNames(call: OperationCall): Promise<string[]> {
  const { databaseName, collectionName } = call.args;
  const coll = call.ctx.internalClient.db(databaseName).collection(collectionName);
  try {
    return (await coll.listIndexes().toArray()).map((index) => index.name as string);
  } catch (error) {
    if ((error as { code?: number }).code === 26) return []; // NamespaceNotFound
    throw error;
  }
}

export const testRunnerOperations: Record<string, OperationFn> = {
  async failPoint(call) {
    const { client } = call.entities.get(call.args.client, 'client');
    await call.failPoints.enable(client, call.args.failPoint);
  },
  async targetedFailPoint(call) {
    // Single servers and replica sets have one server a session can be pinned to: the primary.
    const session = sessionArg(call);
    check(call.ctx.server.topology !== 'sharded', 'targetedFailPoint on mongos is not supported');
    const { client } = session as unknown as { client: MongoClient };
    await call.failPoints.enable(client, call.args.failPoint);
  },
  async assertSessionTransactionState(call) {
    const state = (sessionArg(call) as any).transaction.state as string;
    const wanted = TRANSACTION_STATES[call.args.state as string];
    check(!!wanted?.includes(state), `transaction state is ${state}, expected ${call.args.state}`);
  },
  async assertSessionPinned(call) {
    check(!!(sessionArg(call) as any).isPinned, 'session is not pinned');
  },
  async assertSessionUnpinned(call) {
    check(!(sessionArg(call) as any).isPinned, 'session is pinned');
  },
  async assertSessionDirty(call) {
    check((sessionArg(call) as any).serverSession?.isDirty === true, 'session is not dirty');
  },
  async assertSessionNotDirty(call) {
    check((sessionArg(call) as any).serverSession?.isDirty !== true, 'session is dirty');
  },
  async assertSameLsidOnLastTwoCommands(call) {
    const [a, b] = lastTwoLsids(call);
    check(scalarsEqual(a.id, b.id), 'the last two commands have different lsids');
  },
  async assertDifferentLsidOnLastTwoCommands(call) {
    const [a, b] = lastTwoLsids(call);
    check(!scalarsEqual(a.id, b.id), 'the last two commands have the same lsid');
  },
  async assertCollectionExists(call) {
    const names = await collectionNames(call);
    check(names.includes(call.args.collectionName), `${call.args.collectionName} does not exist`);
  },
  async assertCollectionNotExists(call) {
    const names = await collectionNames(call);
    check(!names.includes(call.args.collectionName), `${call.args.collectionName} exists`);
  },
  async assertIndexExists(call) {
    const names = await indexNames(call);
    check(names.includes(call.args.indexName), `index ${call.args.indexName} does not exist`);
  },
  async assertIndexNotExists(call) {
    const names = await indexNames(call);
    check(!names.includes(call.args.indexName), `index ${call.args.indexName} exists`);
  },
  async createEntities(call) {
    await createEntities(call.entities, call.args.entities, call.ctx);
  },
  async wait(call) {
    await new Promise((resolve) => setTimeout(resolve, call.args.ms));
  },
};
