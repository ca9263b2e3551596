// What an operation implementation receives, and helpers shared by them.
import type { BulkWriteResult, Document } from 'mongodb';
import type { RunContext } from '../../run-context';
import type { EntityMap } from '../entities';
import type { FailPoints } from '../fail-points';

export interface OperationSpec {
  name: string;
  object: string;
  arguments?: Document;
  expectResult?: unknown;
  expectError?: Document;
  saveResultAsEntity?: string;
  ignoreResultAndError?: boolean;
}

export interface OperationCall {
  operation: OperationSpec;
  /** The arguments, with `session` resolved and read/write concerns converted. */
  args: Document;
  entities: EntityMap;
  ctx: RunContext;
  failPoints: FailPoints;
  /** Runs a nested operation with its own assertions (withTransaction's callback). */
  runNested(operation: OperationSpec): Promise<void>;
}

export type OperationFn = (call: OperationCall) => Promise<unknown>;

/** A BulkWriteResult as the document the spec's expectResult describes. */
export function bulkWriteResultDocument(result: BulkWriteResult): Document {
  return {
    insertedCount: result.insertedCount,
    matchedCount: result.matchedCount,
    modifiedCount: result.modifiedCount,
    deletedCount: result.deletedCount,
    upsertedCount: result.upsertedCount,
    upsertedIds: result.upsertedIds,
    insertedIds: result.insertedIds,
  };
}

/** Splits named positional arguments from the options object the driver takes last. */
export function take<K extends string>(args: Document, ...names: K[]) {
  const options: Document = { ...args };
  const picked = {} as Record<K, any>;
  for (const name of names) {
    picked[name] = options[name];
    delete options[name];
  }
  return [picked, options] as const;
}
