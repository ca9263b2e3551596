// Session and transaction operations, and the client-level bulk write.
import type { AnyClientBulkWriteModel, ClientBulkWriteResult, Document } from 'mongodb';
import { take, type OperationCall, type OperationFn } from './operation-call';

const session = (call: OperationCall) => call.entities.get(call.operation.object, 'session');

/** `{ insertOne: { namespace, document } }` as the driver's `{ name: 'insertOne', ... }`. */
function clientWriteModels(models: Document[]): AnyClientBulkWriteModel<Document>[] {
  return models.map((model) => {
    const [name, fields] = Object.entries(model)[0];
    return { name, ...fields } as AnyClientBulkWriteModel<Document>;
  });
}

export function clientBulkWriteResultDocument(result: ClientBulkWriteResult): Document {
  const mapToDocument = (map?: ReadonlyMap<number, unknown>) =>
    map ? Object.fromEntries([...map.entries()].map(([k, v]) => [String(k), v])) : undefined;
  return {
    insertedCount: result.insertedCount,
    upsertedCount: result.upsertedCount,
    matchedCount: result.matchedCount,
    modifiedCount: result.modifiedCount,
    deletedCount: result.deletedCount,
    insertResults: mapToDocument(result.insertResults),
    updateResults: mapToDocument(result.updateResults),
    deleteResults: mapToDocument(result.deleteResults),
  };
}

export const sessionOperations: Record<string, OperationFn> = {
  async startTransaction(call) {
    session(call).startTransaction(call.args);
  },
  async commitTransaction(call) {
    await session(call).commitTransaction();
  },
  async abortTransaction(call) {
    await session(call).abortTransaction();
  },
  async endSession(call) {
    await session(call).endSession();
  },
  async withTransaction(call) {
    const [{ callback }, options] = take(call.args, 'callback');
    await session(call).withTransaction(async () => {
      for (const operation of callback) await call.runNested(operation);
    }, options);
  },
  async clientBulkWrite(call) {
    const [{ models }, options] = take(call.args, 'models');
    const { client } = call.entities.get(call.operation.object, 'client');
    const result = await client.bulkWrite(clientWriteModels(models), options);
    return clientBulkWriteResultDocument(result);
  },
};
