// Executing one test of a CRUD v1 file (`data`, `tests[].operation`, `tests[].outcome`) by
// translating it to the unified runner's single operation against a fresh client.
import type { Document } from 'mongodb';
import { assertCollectionContents, setUpCollection } from '../collection-data';
import type { RunContext } from '../run-context';
import { createEntities, EntityMap } from '../unified/entities';
import { executeOperation } from '../unified/execute-operation';
import { FailPoints } from '../unified/fail-points';
import { withDeadline } from '../deadline';

/** The format leaves the namespace to the runner. */
export const CRUD_V1_DATABASE = 'crud-v1-tests';
export const CRUD_V1_COLLECTION = 'test';

/** v1 spells bulk requests `{ name, arguments }` and nests `ordered` under `options`. */
export function unifiedArguments(name: string, args: Document = {}): Document {
  const { options, ...rest } = args;
  const flat: Document = { ...rest, ...(options ?? {}) };
  if (name === 'bulkWrite') {
    flat.requests = (rest.requests as Document[]).map((r) => ({ [r.name]: r.arguments }));
  }
  return flat;
}

export async function runCrudV1Test(file: Document, test: Document, ctx: RunContext) {
  const outcome: Document = test.outcome ?? {};
  const outcomeCollection: string = outcome.collection?.name ?? CRUD_V1_COLLECTION;
  await setUpCollection(ctx.internalClient, {
    databaseName: CRUD_V1_DATABASE,
    collectionName: CRUD_V1_COLLECTION,
    documents: file.data ?? [],
  });
  if (outcomeCollection !== CRUD_V1_COLLECTION) {
    await ctx.internalClient
      .db(CRUD_V1_DATABASE)
      .collection(outcomeCollection)
      .drop()
      .catch(() => false);
  }

  const entities = new EntityMap();
  try {
    await createEntities(
      entities,
      [
        { client: { id: 'client' } },
        { database: { id: 'database', client: 'client', databaseName: CRUD_V1_DATABASE } },
        {
          collection: {
            id: 'collection',
            database: 'database',
            collectionName: CRUD_V1_COLLECTION,
          },
        },
      ],
      ctx,
    );
    const { name, arguments: args, object } = test.operation;
    const operation = executeOperation(
      {
        name,
        object: object === 'database' ? 'database' : 'collection',
        arguments: unifiedArguments(name, args),
        ...(outcome.error
          ? {
              expectError: {
                isError: true,
                ...(outcome.result ? { expectResult: outcome.result } : {}),
              },
            }
          : { expectResult: outcome.result }),
      },
      { entities, ctx, failPoints: new FailPoints() },
    );
    await withDeadline(operation, () => entities.close());
  } finally {
    await entities.close();
  }
  if (outcome.collection) {
    await assertCollectionContents(ctx.internalClient, {
      databaseName: CRUD_V1_DATABASE,
      collectionName: outcomeCollection,
      documents: outcome.collection.data,
    });
  }
}
