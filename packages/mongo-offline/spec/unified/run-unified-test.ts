// Executing one test of a unified-format file ("Executing a Test" in the format's spec).
import type { Document } from 'mongodb';
import { assertCollectionContents, setUpCollection } from '../collection-data';
import { withDeadline } from '../deadline';
import { compareVersions, parseVersion } from '../requirements';
import type { RunContext } from '../run-context';
import { createEntities, EntityMap } from './entities';
import { executeOperation, prefixed, type OperationScope } from './execute-operation';
import { assertExpectedEvents } from './expected-events';
import { FailPoints } from './fail-points';

/** The newest schema version this runner reads; files of a newer 1.x minor are refused. */
export const SUPPORTED_SCHEMA_VERSION = '1.28';

export function unsupportedSchemaVersion(version: string): string | undefined {
  const [major] = parseVersion(version);
  const [supportedMajor] = parseVersion(SUPPORTED_SCHEMA_VERSION);
  const tooNew = compareVersions(parseVersion(version), parseVersion(SUPPORTED_SCHEMA_VERSION)) > 0;
  if (major !== supportedMajor || tooNew) {
    return `schemaVersion ${version} is not supported (runner reads ${SUPPORTED_SCHEMA_VERSION})`;
  }
  return undefined;
}

const TRANSACTION_OPERATIONS = new Set(['startTransaction', 'withTransaction']);

/** Ends transactions a test may have left open; servers without the command are fine. */
async function killAllSessions(ctx: RunContext) {
  try {
    await ctx.internalClient.db('admin').command({ killAllSessions: [] });
  } catch {
    // Interrupted/Unauthorized are ignorable by the spec; a server without it has nothing to end.
  }
}

export async function runUnifiedTest(file: Document, test: Document, ctx: RunContext) {
  const unsupported = unsupportedSchemaVersion(file.schemaVersion);
  if (unsupported) throw new Error(unsupported);
  for (const data of file.initialData ?? []) await setUpCollection(ctx.internalClient, data);

  const scope: OperationScope = { entities: new EntityMap(), ctx, failPoints: new FailPoints() };
  let failed = false;
  try {
    await withDeadline(runOperationsAndAssert(file, test, scope), () => scope.entities.close());
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    for (const { recorder } of scope.entities.clients()) recorder.stop();
    await scope.failPoints.disableAll(ctx.internalClient).catch(() => undefined);
    await scope.entities.close();
    const operations: Document[] = test.operations;
    const startedTransaction = operations.some((op) => TRANSACTION_OPERATIONS.has(op.name));
    if (failed || startedTransaction) await killAllSessions(ctx);
  }
}

async function runOperationsAndAssert(file: Document, test: Document, scope: OperationScope) {
  const { entities, ctx, failPoints } = scope;
  await createEntities(entities, file.createEntities ?? [], ctx);
  const operations: Document[] = test.operations;
  for (const [index, operation] of operations.entries()) {
    try {
      await executeOperation(operation as never, scope);
    } catch (error) {
      throw prefixed(error, `operation ${index} (${operation.name}): `);
    }
  }
  for (const { recorder } of entities.clients()) recorder.stop();
  await failPoints.disableAll(ctx.internalClient);
  if (test.expectEvents) assertExpectedEvents(test.expectEvents, entities);
  for (const data of test.outcome ?? []) await assertCollectionContents(ctx.internalClient, data);
}
