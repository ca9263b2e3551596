// Executing one operation of a unified test: arguments, dispatch, and its result/error assertions.
import {
  AbstractCursor,
  ChangeStream,
  type Document,
  type FindCursor,
  type RunCommandCursor,
} from 'mongodb';
import { assertMatches, describe } from '../matching/match';
import type { RunContext } from '../run-context';
import { toReadPreference, type EntityMap } from './entities';
import { assertExpectedError } from './expected-error';
import type { FailPoints } from './fail-points';
import { crudOperations } from './operations/crud-operations';
import { cursorOperations } from './operations/cursor-operations';
import type { OperationFn, OperationSpec } from './operations/operation-call';
import { sessionOperations } from './operations/session-operations';
import { testRunnerOperations } from './operations/test-runner-operations';

const ENTITY_OPERATIONS: Record<string, OperationFn> = {
  ...crudOperations,
  ...cursorOperations,
  ...sessionOperations,
};

// Their results are iterables of documents, each matched as a root-level document.
const DOCUMENT_LIST_OPERATIONS = new Set([
  'find',
  'aggregate',
  'runCursorCommand',
  'listCollections',
  'listIndexes',
  'listDatabases',
]);

export interface OperationScope {
  entities: EntityMap;
  ctx: RunContext;
  failPoints: FailPoints;
}

/** `session` resolved to its entity; read preference as the driver's object. */
function prepareArguments(args: Document | undefined, scope: OperationScope): Document {
  const prepared: Document = { ...(args ?? {}) };
  if (typeof prepared.session === 'string') {
    prepared.session = scope.entities.get(prepared.session, 'session');
  }
  if (prepared.readPreference) prepared.readPreference = toReadPreference(prepared.readPreference);
  return prepared;
}

function operationFn(operation: OperationSpec): OperationFn {
  const table = operation.object === 'testRunner' ? testRunnerOperations : ENTITY_OPERATIONS;
  const fn = Object.hasOwn(table, operation.name) ? table[operation.name] : undefined;
  if (!fn) throw new Error(`Operation ${operation.name} on ${operation.object} is not supported`);
  return fn;
}

function saveEntity(scope: OperationScope, name: string, result: unknown) {
  const { entities } = scope;
  if (result === undefined || result === null) throw new Error(`No result to save as ${name}`);
  if (result instanceof ChangeStream) entities.set(name, { kind: 'changeStream', value: result });
  else if (result instanceof AbstractCursor) {
    // FindCursor, or the RunCommandCursor that the driver does not export as a value.
    entities.set(name, { kind: 'cursor', value: result as FindCursor | RunCommandCursor });
  } else entities.set(name, { kind: 'bson', value: result });
}

/**
 * Runs `operation` and asserts its outcome. In withTransaction's callback (`inCallback`) an error
 * is rethrown after its assertions: the spec lets it reach withTransaction in any case.
 */
export async function executeOperation(
  operation: OperationSpec,
  scope: OperationScope,
  inCallback = false,
) {
  const fn = operationFn(operation);
  const args = prepareArguments(operation.arguments, scope);
  const runNested = (nested: OperationSpec) => executeOperation(nested, scope, true);
  let result: unknown;
  let error: Error | undefined;
  try {
    result = await fn({ operation, args, runNested, ...scope });
  } catch (caught) {
    error = caught instanceof Error ? caught : new Error(describe(caught));
  }
  const where = `${operation.object}.${operation.name}`;
  if (operation.ignoreResultAndError) {
    if (inCallback && error !== undefined) throw error;
    return;
  }
  if (operation.expectError) {
    if (error === undefined) {
      throw new Error(`${where} should have failed, but returned ${describe(result)}`);
    }
    try {
      assertExpectedError(operation.expectError, error, scope.entities);
    } catch (failure) {
      throw prefixed(failure, `${where}: `);
    }
    if (inCallback) throw error;
    return;
  }
  if (error !== undefined) {
    throw new Error(`${where} failed: ${error.name}: ${error.message}`, { cause: error });
  }
  if (operation.expectResult !== undefined) {
    assertMatches(operation.expectResult, result, {
      root: true,
      rootElements: DOCUMENT_LIST_OPERATIONS.has(operation.name),
      entities: scope.entities,
      path: `${where} result`,
    });
  }
  if (operation.saveResultAsEntity) saveEntity(scope, operation.saveResultAsEntity, result);
}

/** Adds context to an assertion's message, keeping the error and its stack. */
export function prefixed(error: unknown, prefix: string): Error {
  const failure = error instanceof Error ? error : new Error(describe(error));
  failure.message = `${prefix}${failure.message}`;
  return failure;
}
