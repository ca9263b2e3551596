// `expectError`: assertions on the error an operation raised.
import { MongoBulkWriteError, MongoServerError, type Document } from 'mongodb';
import { assertMatches, type MatchEntities } from '../matching/match';
import { clientBulkWriteResultDocument } from './operations/session-operations';
import { bulkWriteResultDocument } from './operations/operation-call';

function check(condition: boolean, message: string) {
  if (!condition) throw new Error(message);
}

/**
 * The error whose code and message count (a client bulk write's top-level error is its `cause`)
 * and the per-write errors that count too: a collection bulk write's, whose assertions must look
 * into them, but not a client bulk write's, which has its own `writeErrors` assertion.
 */
function errorParts(error: any) {
  const isClientBulkWrite = error?.name === 'MongoClientBulkWriteError';
  const topLevel = isClientBulkWrite && error.cause ? error.cause : error;
  if (isClientBulkWrite) return { writeErrors: [], writeConcernErrors: [], topLevel };
  const writeErrors: any[] = error?.writeErrors ?? [];
  const writeConcernErrors: any[] = [
    ...(error?.err ? [error.err] : []),
    ...(error?.writeConcernError ? [error.writeConcernError] : []),
  ];
  return { writeErrors, writeConcernErrors, topLevel };
}

function messagesOf(error: any): string[] {
  const { writeErrors, writeConcernErrors, topLevel } = errorParts(error);
  return [
    topLevel?.message,
    error?.message,
    ...writeErrors.map((e) => e.errmsg ?? e.message),
    ...writeConcernErrors.map((e) => e.errmsg ?? e.message),
  ].filter((m): m is string => typeof m === 'string');
}

function codeNamesOf(error: any): string[] {
  const { writeErrors, writeConcernErrors, topLevel } = errorParts(error);
  return [
    topLevel?.codeName,
    topLevel?.errorResponse?.codeName,
    ...writeErrors.map((e) => e.codeName ?? e.err?.codeName),
    ...writeConcernErrors.map((e) => e.codeName),
  ].filter((n): n is string => typeof n === 'string');
}

function hasLabel(error: any, label: string): boolean {
  if (typeof error?.hasErrorLabel === 'function') return error.hasErrorLabel(label) as boolean;
  return Array.isArray(error?.errorLabels) && error.errorLabels.includes(label);
}

function resultOf(error: any): unknown {
  if (error instanceof MongoBulkWriteError) return bulkWriteResultDocument(error.result);
  if (error?.partialResult) return clientBulkWriteResultDocument(error.partialResult);
  return undefined;
}

export function assertExpectedError(expected: Document, error: any, entities: MatchEntities) {
  const isServerError = errorParts(error).topLevel instanceof MongoServerError;
  const what = `${error?.name ?? 'error'}: ${error?.message ?? String(error)}`;
  if (expected.isClientError !== undefined) {
    check(
      expected.isClientError === !isServerError,
      `isClientError ${expected.isClientError}, got ${what}`,
    );
  }
  if (expected.isTimeoutError !== undefined) {
    const isTimeout = error?.name === 'MongoOperationTimeoutError';
    check(
      expected.isTimeoutError === isTimeout,
      `isTimeoutError ${expected.isTimeoutError}, got ${what}`,
    );
  }
  if (expected.errorContains !== undefined) {
    const wanted = String(expected.errorContains).toLowerCase();
    check(
      messagesOf(error).some((m) => m.toLowerCase().includes(wanted)),
      `error should contain "${expected.errorContains}", got ${what}`,
    );
  }
  if (expected.errorCode !== undefined) {
    const { topLevel } = errorParts(error);
    check(
      topLevel?.code === expected.errorCode,
      `errorCode ${expected.errorCode}, got code ${topLevel?.code} (${what})`,
    );
  }
  if (expected.errorCodeName !== undefined) {
    const wanted = String(expected.errorCodeName).toLowerCase();
    check(
      codeNamesOf(error).some((n) => n.toLowerCase() === wanted),
      `errorCodeName ${expected.errorCodeName}, got ${codeNamesOf(error).join(',') || 'none'} (${what})`,
    );
  }
  for (const label of expected.errorLabelsContain ?? []) {
    check(
      hasLabel(error, label),
      `error should have label ${label}, has ${JSON.stringify(error?.errorLabels ?? [])}`,
    );
  }
  for (const label of expected.errorLabelsOmit ?? []) {
    check(!hasLabel(error, label), `error should not have label ${label}`);
  }
  if (expected.errorResponse !== undefined) {
    const response = errorParts(error).topLevel?.errorResponse;
    check(
      response !== undefined,
      `errorResponse expected, but the error has no server response (${what})`,
    );
    assertMatches(expected.errorResponse, response, {
      root: true,
      entities,
      path: 'errorResponse',
    });
  }
  if (expected.expectResult !== undefined) {
    assertMatches(expected.expectResult, resultOf(error), {
      root: true,
      entities,
      path: 'error result',
    });
  }
  if (expected.writeErrors !== undefined) {
    const actual =
      error?.writeErrors instanceof Map
        ? Object.fromEntries([...error.writeErrors].map(([k, v]) => [String(k), v]))
        : undefined;
    check(actual !== undefined, `writeErrors expected (${what})`);
    check(
      Object.keys(actual!).length === Object.keys(expected.writeErrors).length,
      'writeErrors count differs',
    );
    for (const [index, writeError] of Object.entries(expected.writeErrors as Document)) {
      assertMatches(writeError, actual![index], {
        root: true,
        entities,
        path: `writeErrors.${index}`,
      });
    }
  }
  if (expected.writeConcernErrors !== undefined) {
    assertMatches(expected.writeConcernErrors, error?.writeConcernErrors, {
      entities,
      path: 'writeConcernErrors',
    });
  }
}
