import { Decimal128, ObjectId } from 'mongodb';
import type { Document } from 'mongodb';
import { InvalidLockKeyError } from '../errors/invalid-lock-key.error';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import type { AttemptTarget } from '../store/acquire-attempt';
import type { DocumentVersion } from '../store/documents/document-version';
import { toVersionValue } from '../store/documents/document-version';
import type { DocumentUpdate } from '../store/documents/document-writes';
import type { DocumentLockOptions, DocumentLocksOptions } from './document-locks-options.interface';

/** A collection's document-lock settings, checked. */
export interface ResolvedDocumentLocksOptions {
  collection: string;
  dbName: string | undefined;
  lockField: string;
  version: DocumentVersion | undefined;
  idType: 'string' | 'objectId' | 'number' | undefined;
}

function bad(option: string, message: string): never {
  throw new InvalidLockOptionsError(`${option} ${message}`, { option });
}

/** A field name of the application's documents that the library writes or reads. */
function fieldName(option: string, value: unknown, allowDots: boolean): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 200) {
    bad(option, 'must be a non-empty string of at most 200 characters');
  }
  if (value.includes('\0') || value.startsWith('$') || value.includes('.$')) {
    bad(option, `must not contain NUL nor start a part with $, got ${JSON.stringify(value)}`);
  }
  if (!allowDots && (value.includes('.') || value.includes('$'))) {
    bad(option, `must not contain . or $, got ${JSON.stringify(value)}`);
  }
  if (value === '_id' || value.startsWith('_id.')) bad(option, 'must not be _id');
  return value;
}

export function resolveDocumentLocksOptions(
  collection: unknown,
  options: DocumentLocksOptions | undefined,
): ResolvedDocumentLocksOptions {
  if (typeof collection !== 'string' || !/^[^$\0]{1,200}$/.test(collection)) {
    bad(
      'collection',
      `must be a collection name (1 to 200 characters, no $ or NUL), got ${JSON.stringify(collection)}`,
    );
  }
  const given = options ?? {};
  if (typeof given !== 'object' || given === null) bad('options', 'must be an object');
  if (
    given.dbName !== undefined &&
    (typeof given.dbName !== 'string' || !/^[^/\\. "$\0]{1,63}$/.test(given.dbName))
  ) {
    bad('dbName', `must be a database name, got ${JSON.stringify(given.dbName)}`);
  }
  const lockField =
    given.lockField === undefined ? '_lock' : fieldName('lockField', given.lockField, false);
  let version: DocumentVersion | undefined;
  if (given.version !== undefined) {
    if (typeof given.version !== 'object' || given.version === null)
      bad('version', 'must be { field, type? }');
    const field = fieldName('version.field', given.version.field, true);
    if (field === lockField || field.startsWith(`${lockField}.`))
      bad('version.field', 'must not be inside the lock field');
    const type = given.version.type ?? 'int';
    if (!['int', 'date', 'decimal128'].includes(type))
      bad('version.type', `must be 'int', 'date' or 'decimal128', got ${JSON.stringify(type)}`);
    version = { field, type };
  }
  const idType = given.idType;
  if (idType !== undefined && !['string', 'objectId', 'number'].includes(idType)) {
    bad('idType', `must be 'string', 'objectId' or 'number', got ${JSON.stringify(idType)}`);
  }
  return { collection, dbName: given.dbName, lockField, version, idType };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

function hasOperatorKey(value: unknown): boolean {
  if (Array.isArray(value)) return value.some(hasOperatorKey);
  if (!isPlainObject(value)) return false;
  return Object.entries(value).some(([key, inner]) => key.startsWith('$') || hasOperatorKey(inner));
}

function badId(id: unknown, why: string): never {
  const shown = typeof id === 'string' ? JSON.stringify(id.slice(0, 64)) : typeof id;
  throw new InvalidLockKeyError(`Document id ${shown} ${why}`);
}

/** The `_id` to lock: checked, and converted from a string when the collection's `idType` says so. */
export function resolveDocumentId(
  id: unknown,
  idType: ResolvedDocumentLocksOptions['idType'],
): unknown {
  if (id === undefined || id === null) badId(id, 'is missing');
  if (typeof id === 'string' && idType === 'objectId') {
    if (!/^[0-9a-fA-F]{24}$/.test(id)) badId(id, 'is not an ObjectId (24 hexadecimal digits)');
    return new ObjectId(id);
  }
  if (typeof id === 'string' && idType === 'number') {
    if (!/^-?\d{1,15}$/.test(id)) badId(id, 'is not an integer');
    return Number(id);
  }
  if (idType === 'objectId' && !(id instanceof ObjectId)) badId(id, 'is not an ObjectId');
  if (idType === 'number' && typeof id !== 'number') badId(id, 'is not a number');
  if (idType === 'string' && typeof id !== 'string') badId(id, 'is not a string');
  if (typeof id === 'string') {
    if (id.length === 0 || id.length > 1024 || id.includes('\0'))
      badId(id, 'must be 1 to 1024 characters without NUL');
    return id;
  }
  if (typeof id === 'number') {
    if (!Number.isFinite(id)) badId(id, 'must be a finite number');
    return id;
  }
  if (
    typeof id === 'function' ||
    typeof id === 'symbol' ||
    typeof id === 'bigint' ||
    typeof id === 'boolean'
  ) {
    badId(id, 'is not a usable _id');
  }
  if (id instanceof RegExp || Array.isArray(id))
    badId(id, 'is not a usable _id (a regex or an array would match other documents)');
  if (hasOperatorKey(id)) badId(id, 'contains a $ operator');
  return id;
}

/** The where/createIfMissing of an acquisition, checked. */
export function resolveAttemptTarget(
  options: DocumentLockOptions | undefined,
  settings: ResolvedDocumentLocksOptions,
  id: unknown,
): AttemptTarget | undefined {
  const where = options?.where as unknown;
  const create = options?.createIfMissing as unknown;
  if (where === undefined && create === undefined) return undefined;
  const touchesReserved = (name: string) =>
    name === '_id' || name === settings.lockField || name.startsWith(`${settings.lockField}.`);
  if (where !== undefined) {
    if (!isPlainObject(where)) bad('where', 'must be a filter object');
    const reserved = Object.keys(where).find(touchesReserved);
    if (reserved) bad('where', `must not name ${reserved}: the lock sets those conditions itself`);
  }
  let createIfMissing: Record<string, unknown> | undefined;
  if (create !== undefined) {
    if (!isPlainObject(create)) bad('createIfMissing', 'must be an object of fields');
    for (const name of Object.keys(create)) {
      if (name === '_id' && sameId(create._id, id)) continue;
      if (touchesReserved(name) || name.startsWith('$') || name.includes('.')) {
        bad('createIfMissing', `must not have the field ${JSON.stringify(name)}`);
      }
    }
    const { _id: _ignored, ...fields } = create;
    createIfMissing = { ...initialVersion(settings.version), ...fields };
  }
  return { where: where, createIfMissing };
}

function sameId(a: unknown, b: unknown): boolean {
  return a === b || (a instanceof ObjectId && b instanceof ObjectId && a.equals(b));
}

function initialVersion(version: DocumentVersion | undefined): Document {
  if (!version || version.field.includes('.')) return {};
  const initial =
    version.type === 'int'
      ? 0
      : version.type === 'decimal128'
        ? Decimal128.fromString('0')
        : new Date(0);
  return { [version.field]: initial };
}

const UPDATE_OPERATORS = new Set([
  '$set',
  '$unset',
  '$inc',
  '$mul',
  '$min',
  '$max',
  '$rename',
  '$currentDate',
  '$push',
  '$pull',
  '$addToSet',
  '$pop',
  '$pullAll',
  '$bit',
]);
const PIPELINE_STAGES = new Set(['$set', '$addFields', '$unset']);

/**
 * An update for a document write: an update document of field operators, or a pipeline of
 * `$set`/`$addFields`/`$unset` stages; neither may touch `_id`, the lock field or the version
 * field (the library writes those), and a replacement document is refused (it would wipe the lock).
 */
export function resolveDocumentUpdate(
  update: unknown,
  settings: ResolvedDocumentLocksOptions,
  optional: boolean,
): DocumentUpdate | undefined {
  if (update === undefined && optional) return undefined;
  const reserved = (path: string) => {
    const root = path.split('.')[0];
    return (
      root === '_id' ||
      root === settings.lockField ||
      (settings.version !== undefined &&
        (path === settings.version.field ||
          path.startsWith(`${settings.version.field}.`) ||
          settings.version.field.startsWith(`${path}.`)))
    );
  };
  const checkPaths = (paths: string[]) => {
    const touched = paths.find(reserved);
    if (touched)
      bad(
        'update',
        `must not write ${JSON.stringify(touched)}: the library writes _id, the lock and the version`,
      );
  };
  if (Array.isArray(update)) {
    for (const stage of update as unknown[]) {
      const names = isPlainObject(stage) ? Object.keys(stage) : [];
      if (names.length !== 1 || !PIPELINE_STAGES.has(names[0])) {
        bad('update', 'pipelines may only have $set, $addFields and $unset stages');
      }
      const body = (stage as Record<string, unknown>)[names[0]];
      const paths =
        typeof body === 'string'
          ? [body]
          : Array.isArray(body)
            ? (body as string[])
            : Object.keys(body as object);
      checkPaths(paths.map(String));
    }
    return update as Document[];
  }
  if (!isPlainObject(update)) bad('update', 'must be an update document or a pipeline');
  for (const [operator, fields] of Object.entries(update)) {
    if (!UPDATE_OPERATORS.has(operator)) {
      bad(
        'update',
        `must use update operators ($set, $inc, …), got ${JSON.stringify(operator)}: a replacement would wipe the lock`,
      );
    }
    if (!isPlainObject(fields)) bad('update', `${operator} must be an object of fields`);
    checkPaths(Object.keys(fields));
    if (operator === '$rename') checkPaths(Object.values(fields).map(String));
  }
  return update;
}

/** An expected version, in the version field's BSON type. */
export function resolveExpectedVersion(
  value: unknown,
  version: DocumentVersion | undefined,
): unknown {
  if (!version) {
    bad(
      'version',
      'is not configured for this collection: updateIfCurrent needs documents({ version })',
    );
  }
  if (isPlainObject(value) || Array.isArray(value))
    bad('expectedVersion', 'must be a version value, not an object');
  const converted = toVersionValue(version, value);
  if (converted === undefined) {
    bad(
      'expectedVersion',
      `must be a ${version.type} version, got ${typeof value === 'string' ? JSON.stringify(value.slice(0, 64)) : typeof value}`,
    );
  }
  return converted;
}
