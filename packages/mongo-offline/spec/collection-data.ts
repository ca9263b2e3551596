// Setting collections up before a test and checking their contents after it, with the runner's
// internal client (both formats).
import type { Document, MongoClient } from 'mongodb';
import { describe, findMismatches } from './matching/match';

export interface CollectionData {
  databaseName: string;
  collectionName: string;
  documents: Document[];
  createOptions?: Document;
}

const MAJORITY = { writeConcern: { w: 'majority' } } as const;

async function dropIfExists(client: MongoClient, db: string, collection: string) {
  try {
    await client.db(db).collection(collection).drop(MAJORITY);
  } catch (error) {
    if ((error as { code?: number }).code !== 26) throw error; // NamespaceNotFound
  }
}

/** initialData: drop (with the queryable-encryption side collections), create, insert. */
export async function setUpCollection(client: MongoClient, data: CollectionData) {
  const { databaseName, collectionName, documents, createOptions } = data;
  await dropIfExists(client, databaseName, collectionName);
  await dropIfExists(client, databaseName, `enxcol_.${collectionName}.esc`);
  await dropIfExists(client, databaseName, `enxcol_.${collectionName}.ecoc`);
  const db = client.db(databaseName);
  if (createOptions || documents.length === 0) {
    await db.createCollection(collectionName, { ...createOptions, ...MAJORITY });
  }
  if (documents.length > 0) {
    await db.collection(collectionName).insertMany(documents, MAJORITY);
  }
}

/**
 * The collection holds exactly `expected`: same documents in `_id` order, no extra fields
 * anywhere (the matching rules' root-level leniency does not apply here), numbers of the same
 * BSON type, key order free.
 */
export async function assertCollectionContents(client: MongoClient, data: CollectionData) {
  const { databaseName, collectionName, documents: expected } = data;
  const actual = await client
    .db(databaseName)
    .collection(collectionName)
    .find(
      {},
      {
        sort: { _id: 1 },
        readPreference: 'primary',
        readConcern: { level: 'local' },
        // Unpromoted, an int32 and a double stay apart, as an exact match needs.
        promoteValues: false,
      },
    )
    .toArray();
  const mismatches = findMismatches(expected, actual, {
    path: `${databaseName}.${collectionName}`,
    exactNumberTypes: true,
  });
  if (mismatches.length > 0) {
    throw new Error(
      `Collection contents differ:\n${mismatches.join('\n')}\n` +
        `  expected: ${describe(expected)}\n  actual:   ${describe(actual)}`,
    );
  }
}
