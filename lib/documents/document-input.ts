import { Decimal128, ObjectId } from 'mongodb';
import type { Document } from 'mongodb';
import { InvalidLockKeyError } from '../errors/invalid-lock-key.error';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import { LONE_SURROGATE } from '../keys/lock-key';
import type { AttemptTarget } from '../store/line/line-commands';
import type { DocumentVersion } from '../store/documents/document-version';
import { toVersionValue } from '../store/documents/document-version';
import { fitsLong, isBson, isLong } from '../store/bson-values';
import { isCollectionName, isDatabaseName, refuseUnknownOptions } from '../option-checks';
import { isPlainObject } from '../util/value-kinds';
import type { DocumentLockOptions, DocumentLocksOptions } from './document-locks-options.interface';

export interface ResolvedDocumentLocksOptions {
  collection: string;
  dbName: string | undefined;
  lockField: string;
  version: DocumentVersion | undefined;
  idType: DocumentLocksOptions['idType'];
}

export function bad(option: string, message: string): never {
  throw new InvalidLockOptionsError(`${option} ${message}`, { option });
}

/** Checks a field name the library writes or reads in the application's documents. */
function fieldName(option: string, value: unknown, allowDots: boolean): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 200) {
    bad(option, 'must be a non-empty string of at most 200 characters');
  }
  if (value.includes('\0') || value.startsWith('$') || value.includes('.$')) {
    bad(option, `must not contain NUL nor start a part with $, got ${JSON.stringify(value)}`);
  }
  // Stored as UTF-8, a lone surrogate becomes U+FFFD: another field than the one named.
  if (LONE_SURROGATE.test(value)) {
    bad(option, `must be well-formed Unicode (no lone surrogate), got ${JSON.stringify(value)}`);
  }
  if (!allowDots && (value.includes('.') || value.includes('$'))) {
    bad(option, `must not contain . or $, got ${JSON.stringify(value)}`);
  }
  // MongoDB refuses such a path only when a write uses it; refuse it here, before any write.
  if (value.split('.').includes('')) {
    bad(option, `must not have an empty part (as in a..b, a. or .a), got ${JSON.stringify(value)}`);
  }
  if (value === '_id' || value.startsWith('_id.')) bad(option, 'must not be _id');
  return value;
}

export function resolveDocumentLocksOptions(
  collection: unknown,
  options: DocumentLocksOptions | undefined,
): ResolvedDocumentLocksOptions {
  if (!isCollectionName(collection, 200)) {
    bad(
      'collection',
      `must be a collection name (1 to 200 characters, no $ or NUL, not starting with . or system.), got ${JSON.stringify(collection)}`,
    );
  }
  const given = options ?? {};
  if (typeof given !== 'object' || Array.isArray(given)) bad('options', 'must be an object');
  // A misspelt `lockField` or `version` would lock and version by the defaults, silently.
  refuseUnknownOptions(given, ['dbName', 'lockField', 'version', 'idType']);
  if (given.dbName !== undefined && !isDatabaseName(given.dbName)) {
    bad('dbName', `must be a database name, got ${JSON.stringify(given.dbName)}`);
  }
  const lockField =
    given.lockField === undefined ? '_lock' : fieldName('lockField', given.lockField, false);
  let version: DocumentVersion | undefined;
  if (given.version !== undefined) {
    if (typeof given.version !== 'object' || given.version === null)
      bad('version', 'must be { field, type? }');
    refuseUnknownOptions(given.version, ['field', 'type'], 'version.');
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

function keysAtAnyDepth(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(keysAtAnyDepth);
  if (typeof value !== 'object' || value === null) return [];
  if (value instanceof Map) return [...value.keys()].map(String);
  return Object.entries(value).flatMap(([key, inner]) => [key, ...keysAtAnyDepth(inner)]);
}

/** A usable `_id`: a scalar, a BSON value, or a plain document of those without `$` keys. */
function isIdValue(value: unknown, depth = 0): boolean {
  if (depth > 20) return false;
  if (typeof value === 'string') return !value.includes('\0') && !LONE_SURROGATE.test(value);
  if (typeof value === 'number') return Number.isFinite(value);
  // An int64 as a `useBigInt64` client reads it (`lock.doc._id` too); a wider one has no BSON type.
  if (typeof value === 'bigint') return fitsLong(value);
  if (value instanceof Date) return !Number.isNaN(value.getTime());
  if (typeof value === 'boolean') return true;
  // `null` is a value of an embedded id; a whole `_id: null` is more likely a missing id.
  if (value === null) return depth > 0;
  if (typeof value !== 'object') return false;
  if (typeof (value as { _bsontype?: unknown })._bsontype === 'string') {
    return (value as { _bsontype: string })._bsontype !== 'BSONRegExp';
  }
  if (!isPlainObject(value)) return false;
  return Object.entries(value).every(
    ([key, inner]) =>
      !key.startsWith('$') && !LONE_SURROGATE.test(key) && isIdValue(inner, depth + 1),
  );
}

function badId(id: unknown, why: string): never {
  const shown = typeof id === 'string' ? JSON.stringify(id.slice(0, 64)) : typeof id;
  throw new InvalidLockKeyError(`Document id ${shown} ${why}`);
}

/** The `_id` to lock: checked, and converted from a string as the collection's `idType` says. */
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
    // Digits, at most 16 (2^53 - 1 has 16), of a safe integer: one a double holds exactly.
    const value = Number(id);
    if (!/^-?\d{1,16}$/.test(id) || !Number.isSafeInteger(value)) {
      badId(id, 'is not a safe integer (-9007199254740991 to 9007199254740991)');
    }
    return value;
  }
  if (idType === 'objectId' && !isBson(id, 'ObjectId')) badId(id, 'is not an ObjectId');
  if (idType === 'number' && typeof id !== 'number') badId(id, 'is not a number');
  if (idType === 'string' && typeof id !== 'string') badId(id, 'is not a string');
  if (typeof id === 'string') {
    if (id.length === 0 || id.length > 1024 || id.includes('\0'))
      badId(id, 'must be 1 to 1024 characters without NUL');
    // Stored as UTF-8, a lone surrogate becomes U+FFFD: another id than the one given.
    if (LONE_SURROGATE.test(id)) badId(id, 'is not well-formed Unicode (it has a lone surrogate)');
  }
  if (typeof id === 'number' && !Number.isFinite(id)) badId(id, 'must be a finite number');
  if (id instanceof Date && Number.isNaN(id.getTime())) badId(id, 'is an invalid Date');
  // Anything but a plain document or BSON value (a Map, a class instance) would be serialised
  // into a filter we did not mean.
  if (!isIdValue(id)) {
    badId(
      id,
      'is not a usable _id (a string, number, 64-bit bigint, Date, BSON value or plain document)',
    );
  }
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
    const reserved = [...fieldsOf(where)].find(touchesReserved);
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
    createIfMissing = mergeDeep(initialVersion(settings.version), fields);
    checkCreatedVersion(createIfMissing, settings.version);
    if (where !== undefined) {
      refuseNonEquality(where);
      refuseOverlap(where, createIfMissing);
      // The upsert puts where's equalities over these: `where: { version: '0' }` would make a
      // document no commit could write.
      const created = { ...createIfMissing, ...documentOfEqualities(where) };
      checkCreatedVersion(created, settings.version, 'where');
    }
  }
  return { where, createIfMissing };
}

/**
 * The document's fields `where` names: its own, and its `$and`, `$or` and `$nor` clauses'; not
 * names inside a condition (`$elemMatch: { _id }` is an array element's `_id`).
 */
function* fieldsOf(where: Record<string, unknown>): Generator<string> {
  for (const [name, condition] of Object.entries(where)) {
    if (['$and', '$or', '$nor'].includes(name) && Array.isArray(condition)) {
      for (const clause of condition) if (isPlainObject(clause)) yield* fieldsOf(clause);
    } else if (!name.startsWith('$')) {
      yield name;
    }
  }
}

/** `where`'s conditions, its `$and` clauses' in their place (an upsert copies from both). */
function* conditionsOf(where: Record<string, unknown>): Generator<[string, unknown]> {
  for (const [name, condition] of Object.entries(where)) {
    if (name === '$and' && Array.isArray(condition) && condition.every(isPlainObject)) {
      for (const clause of condition) yield* conditionsOf(clause);
    } else {
      yield [name, condition];
    }
  }
}

/**
 * With `createIfMissing`, `where` must be equalities (top level or in `$and`): an upsert copies
 * those into the created document, and nothing else, so a document made under `$ne`, `$in` or a
 * pattern would not meet the `where` it was locked by.
 */
function refuseNonEquality(where: Record<string, unknown>): void {
  for (const [name, condition] of conditionsOf(where)) {
    if (isOperator(name) || !isEquality(condition)) {
      bad(
        'createIfMissing',
        `needs a where of equalities (a created document must meet it); where's ${JSON.stringify(name)} is not one`,
      );
    }
  }
}

const isOperator = (name: string) => name.startsWith('$');

/** A condition an upsert copies into the document it makes: a value, or `{ $eq: value }`. */
function isEquality(condition: unknown): boolean {
  if (condition === null || typeof condition !== 'object' || condition instanceof Date) return true;
  const bsonType = (condition as { _bsontype?: unknown })._bsontype;
  if (typeof bsonType === 'string') return bsonType !== 'BSONRegExp';
  // A Map, a pattern or a class instance: its fields are not what they seem here.
  if (!Array.isArray(condition) && !isPlainObject(condition)) return false;
  if (isEqForm(condition)) return isEquality(condition.$eq) && !isEqForm(condition.$eq);
  return !keysAtAnyDepth(condition).some(isOperator);
}

const isEqForm = (condition: unknown): condition is { $eq: unknown } =>
  isPlainObject(condition) && Object.keys(condition).length === 1 && '$eq' in condition;

/**
 * An upsert takes `where`'s equality fields over `createIfMissing`'s, whole: a `where` on
 * `meta.tenant` would drop the rest of a created `meta` (the version too). Refused instead.
 */
function refuseOverlap(where: Record<string, unknown>, created: Record<string, unknown>): void {
  for (const [name] of conditionsOf(where)) {
    const [root] = name.split('.');
    if (!isOperator(name) && isPlainObject(created[root])) {
      bad(
        'createIfMissing',
        `must not have the object ${JSON.stringify(root)} while where names ${JSON.stringify(name)}: ` +
          `a created document would keep only where's ${JSON.stringify(root)}. Lock by a field outside it`,
      );
    }
  }
}

/**
 * The fields an upsert takes from `where`'s equalities, as a document: `'meta.v': 1` is
 * `{ meta: { v: 1 } }`. Its fields replace `createIfMissing`'s whole (`joinOrCreate` merges
 * `$$ROOT` over them with `$mergeObjects`).
 */
function documentOfEqualities(where: Record<string, unknown>): Document {
  let found: Document = {};
  for (const [name, condition] of conditionsOf(where)) {
    if (isOperator(name)) continue;
    found = mergeDeep(found, nestedAt(name, isEqForm(condition) ? condition.$eq : condition));
  }
  return found;
}

/** `value` at the dotted `path`: `nestedAt('meta.v', 0)` is `{ meta: { v: 0 } }`. */
function nestedAt(path: string, value: unknown): Document {
  return path
    .split('.')
    .reduceRight<unknown>((inner, part) => ({ [part]: inner }), value) as Document;
}

const isInt32 = (value: number) =>
  Number.isInteger(value) && value >= -(2 ** 31) && value < 2 ** 31 && !Object.is(value, -0);

/**
 * A created document's version must have the field's type (`versionTyped`): one created with
 * `version: '1'` could never be written by `commit` or `updateIfCurrent`.
 */
function checkCreatedVersion(
  created: Document,
  version: DocumentVersion | undefined,
  option: 'createIfMissing' | 'where' = 'createIfMissing',
): void {
  if (!version) return;
  const value = version.field
    .split('.')
    .reduce<unknown>((inner, name) => (isPlainObject(inner) ? inner[name] : undefined), created);
  const typed =
    version.type === 'int'
      ? // A number outside int32 (or -0) is sent as a double, which is no int version.
        (typeof value === 'number' && isInt32(value)) ||
        (typeof value === 'bigint' && fitsLong(value)) ||
        isLong(value) ||
        isBson(value, 'Int32')
      : version.type === 'decimal128'
        ? isBson(value, 'Decimal128')
        : value instanceof Date && !Number.isNaN(value.getTime());
  if (!typed) {
    const accepted = {
      int: 'an integer (a number from -2147483648 to 2147483647, a 64-bit bigint, a Long or an Int32)',
      decimal128: 'a Decimal128',
      date: 'a valid Date',
    }[version.type];
    const why =
      option === 'where'
        ? " (with createIfMissing, a created document takes where's equalities)"
        : '';
    bad(
      option,
      `must give the version field ${JSON.stringify(version.field)} ${accepted} (it is a ${version.type} version) or leave it out${why}, got ${shownValue(value)}`,
    );
  }
}

/** A value as a message shows it: text quoted (shortened), else its kind (a BSON value's type). */
function shownValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.slice(0, 64));
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (typeof value === 'number') return `the number ${value}`;
  if (typeof value !== 'object') return `a ${typeof value}`;
  const bsonType = (value as { _bsontype?: unknown })._bsontype;
  return typeof bsonType === 'string' ? `a ${bsonType}` : 'an object';
}

function sameId(a: unknown, b: unknown): boolean {
  return (
    a === b ||
    (isBson(a, 'ObjectId') && isBson(b, 'ObjectId') && a.toHexString() === b.toHexString())
  );
}

function initialVersion(version: DocumentVersion | undefined): Document {
  if (!version) return {};
  const initial = { int: 0, decimal128: Decimal128.fromString('0'), date: new Date(0) };
  return nestedAt(version.field, initial[version.type]);
}

function mergeDeep(base: Document, extra: Document): Document {
  const merged: Document = { ...base };
  for (const [name, value] of Object.entries(extra) as [string, unknown][]) {
    const current: unknown = merged[name];
    merged[name] =
      isPlainObject(current) && isPlainObject(value) ? mergeDeep(current, value) : value;
  }
  return merged;
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
    bad('expectedVersion', `must be a ${version.type} version, got ${shownValue(value)}`);
  }
  return converted;
}
