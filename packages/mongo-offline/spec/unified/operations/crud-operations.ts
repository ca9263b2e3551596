// Collection and database CRUD operations, proxied to the driver as the CRUD spec names them.
import type { AnyBulkWriteOperation, Collection, Db, Document } from 'mongodb';
import {
  bulkWriteResultDocument,
  take,
  type OperationCall,
  type OperationFn,
} from './operation-call';

const collection = (call: OperationCall) => call.entities.get(call.operation.object, 'collection');

function collectionOrDatabase(call: OperationCall): Collection | Db {
  const kind = call.entities.kindOf(call.operation.object);
  if (kind === 'database') return call.entities.get(call.operation.object, 'database');
  return collection(call);
}

/** "Before"/"After", case-insensitively, as the driver's 'before'/'after'. */
function returnDocumentOption(options: Document): Document {
  if (options.returnDocument === undefined) return options;
  const value = String(options.returnDocument).toLowerCase();
  if (value !== 'before' && value !== 'after') {
    throw new Error(`returnDocument must be Before or After, got ${options.returnDocument}`);
  }
  return { ...options, returnDocument: value };
}

export const crudOperations: Record<string, OperationFn> = {
  async find(call) {
    const [{ filter }, options] = take(call.args, 'filter');
    return collection(call).find(filter, options).toArray();
  },
  async findOne(call) {
    const [{ filter }, options] = take(call.args, 'filter');
    return collection(call).findOne(filter, options);
  },
  async aggregate(call) {
    const [{ pipeline }, options] = take(call.args, 'pipeline');
    return collectionOrDatabase(call).aggregate(pipeline, options).toArray();
  },
  async count(call) {
    const [{ filter }, options] = take(call.args, 'filter');
    return collection(call).count(filter, options);
  },
  async countDocuments(call) {
    const [{ filter }, options] = take(call.args, 'filter');
    return collection(call).countDocuments(filter, options);
  },
  async estimatedDocumentCount(call) {
    return collection(call).estimatedDocumentCount(call.args);
  },
  async distinct(call) {
    const [{ fieldName, filter }, options] = take(call.args, 'fieldName', 'filter');
    return collection(call).distinct(fieldName, filter ?? {}, options);
  },
  async insertOne(call) {
    const [{ document }, options] = take(call.args, 'document');
    return collection(call).insertOne(document, options);
  },
  async insertMany(call) {
    const [{ documents }, options] = take(call.args, 'documents');
    return collection(call).insertMany(documents, options);
  },
  async updateOne(call) {
    const [{ filter, update }, options] = take(call.args, 'filter', 'update');
    return collection(call).updateOne(filter, update, options);
  },
  async updateMany(call) {
    const [{ filter, update }, options] = take(call.args, 'filter', 'update');
    return collection(call).updateMany(filter, update, options);
  },
  async replaceOne(call) {
    const [{ filter, replacement }, options] = take(call.args, 'filter', 'replacement');
    return collection(call).replaceOne(filter, replacement, options);
  },
  async deleteOne(call) {
    const [{ filter }, options] = take(call.args, 'filter');
    return collection(call).deleteOne(filter, options);
  },
  async deleteMany(call) {
    const [{ filter }, options] = take(call.args, 'filter');
    return collection(call).deleteMany(filter, options);
  },
  async findOneAndUpdate(call) {
    const [{ filter, update }, options] = take(call.args, 'filter', 'update');
    return collection(call).findOneAndUpdate(filter, update, returnDocumentOption(options));
  },
  async findOneAndReplace(call) {
    const [{ filter, replacement }, options] = take(call.args, 'filter', 'replacement');
    return collection(call).findOneAndReplace(filter, replacement, returnDocumentOption(options));
  },
  async findOneAndDelete(call) {
    const [{ filter }, options] = take(call.args, 'filter');
    return collection(call).findOneAndDelete(filter, options);
  },
  async bulkWrite(call) {
    const [{ requests }, options] = take(call.args, 'requests');
    const result = await collection(call).bulkWrite(requests as AnyBulkWriteOperation[], options);
    return bulkWriteResultDocument(result);
  },
  async createIndex(call) {
    const [{ keys }, options] = take(call.args, 'keys');
    return collection(call).createIndex(keys, options);
  },
  async dropIndex(call) {
    const [{ name }, options] = take(call.args, 'name');
    await collection(call).dropIndex(name, options);
  },
  async listIndexes(call) {
    return collection(call).listIndexes(call.args).toArray();
  },
  async rename(call) {
    const [{ to }, options] = take(call.args, 'to');
    await collection(call).rename(to, options);
  },
  async createCollection(call) {
    const [{ collection: name }, options] = take(call.args, 'collection');
    await call.entities.get(call.operation.object, 'database').createCollection(name, options);
  },
  async dropCollection(call) {
    const [{ collection: name }, options] = take(call.args, 'collection');
    await call.entities.get(call.operation.object, 'database').dropCollection(name, options);
  },
  async listCollections(call) {
    const [{ filter }, options] = take(call.args, 'filter');
    return call.entities
      .get(call.operation.object, 'database')
      .listCollections(filter, options)
      .toArray();
  },
  async runCommand(call) {
    const [{ command }, options] = take(call.args, 'command', 'commandName');
    return call.entities.get(call.operation.object, 'database').command(command, options);
  },
};
