import { BSON, Binary, type Document, ObjectId, Timestamp, UUID } from 'bson';
import { asciiKey, buildDocument } from './object-builder';

/**
 * Decodes a BSON document exactly as `BSON.deserialize(bytes, DESERIALIZE_OPTIONS)` does, about
 * twice as fast on the commands a lock sends (decoding was a third of the server's CPU time).
 *
 * It handles the common types only, with js-bson's own constructors (ObjectId, Binary and
 * UUID, Timestamp) and its promotions (int64 to number when it fits, int32 and double to
 * number). Anything else (another type, a DBRef-like document, any length or terminator that
 * does not add up) makes it give up and decode the whole document with js-bson, which returns
 * or throws what it always did: the fast path never decides an edge case itself.
 */

/** Longs stay numbers where they fit: mingo compares JS numbers, not bson Long objects. */
export const DESERIALIZE_OPTIONS = {
  promoteLongs: true,
  promoteValues: true,
  validation: { utf8: false },
};

/** How often js-bson decoded a document instead (for tests). */
export const decoderStats = { fallbacks: 0 };

export function decodeBson(bytes: Buffer): Document {
  try {
    if (bytes.length >= 5 && bytes.readInt32LE(0) === bytes.length) {
      const document = decodeDocument(bytes, 0);
      if (document !== undefined) return document;
    }
  } catch {
    // An out-of-range read: js-bson decides what that input means.
  }
  popTo(0); // given up halfway
  decoderStats.fallbacks += 1;
  return BSON.deserialize(bytes, DESERIALIZE_OPTIONS);
}

const GIVE_UP = undefined;
/** Past 2^53 js-bson keeps a Long (or decides at the boundary): left to it. */
const SAFE_HIGH_WORD = 2 ** 21;
const TWO_TO_32 = 2 ** 32;
const DOLLAR = 0x24;
const MAX_SHARED_STRING_BYTES = 16;

/** The document at `start` (its length already checked to fit), or GIVE_UP. */
function decodeDocument(bytes: Buffer, start: number): Document | undefined {
  const end = start + bytes.readInt32LE(start);
  const base = stackTop;
  let keysHash = 0x811c9dc5;
  // js-bson's DBRef test: null, then whether every `$` key so far is $ref / $id / $db.
  let possibleDbRef: boolean | null = null;
  let index = start + 4;
  for (;;) {
    const type = bytes[index++];
    if (type === 0) break;
    let nameEnd = index;
    let hash = 0x811c9dc5;
    let ascii = true;
    for (; nameEnd < end && bytes[nameEnd] !== 0; nameEnd++) {
      if (bytes[nameEnd] >= 0x80) ascii = false;
      hash = Math.imul(hash ^ bytes[nameEnd], 0x01000193);
    }
    if (nameEnd >= end) return GIVE_UP;
    const name = ascii
      ? asciiKey(bytes, index, nameEnd, hash >>> 0)
      : bytes.toString('utf8', index, nameEnd);
    if (possibleDbRef !== false && name.charCodeAt(0) === DOLLAR) {
      possibleDbRef = name === '$ref' || name === '$id' || name === '$db';
    }
    const valueEnd = readValue(bytes, type, nameEnd + 1, end);
    if (valueEnd < 0) return GIVE_UP;
    keyStack[stackTop] = name;
    valueStack[stackTop++] = decodedValue;
    keysHash = Math.imul(keysHash ^ hash, 0x01000193);
    index = valueEnd;
  }
  if (index !== end) return GIVE_UP;
  const document = buildDocument(keyStack, valueStack, base, stackTop, keysHash >>> 0);
  popTo(base);
  if (possibleDbRef && '$ref' in document && '$id' in document) return GIVE_UP;
  return document;
}

/** The array at `start`: js-bson numbers elements itself and never reads their names. */
function decodeArray(bytes: Buffer, start: number): unknown[] | undefined {
  const end = start + bytes.readInt32LE(start);
  const base = stackTop;
  let index = start + 4;
  for (;;) {
    const type = bytes[index++];
    if (type === 0) break;
    while (index < end && bytes[index] !== 0) index++;
    if (index >= end) return GIVE_UP;
    const valueEnd = readValue(bytes, type, index + 1, end);
    if (valueEnd < 0) return GIVE_UP;
    valueStack[stackTop++] = decodedValue;
    index = valueEnd;
  }
  if (index !== end) return GIVE_UP;
  const array = valueStack.slice(base, stackTop);
  popTo(base);
  return array;
}

/**
 * Keys and values of the documents being decoded, innermost last: one stack for the whole
 * decoder instead of two growing arrays per document (most are garbage at once).
 */
const keyStack: string[] = [];
const valueStack: unknown[] = [];
let stackTop = 0;

/** Drops the entries above `base`, so that the stack keeps no decoded value alive. */
function popTo(base: number): void {
  for (let i = base; i < stackTop; i++) valueStack[i] = undefined;
  stackTop = base;
}

/**
 * js-bson's `toUTF8` without validation is `toString('utf8')`, same string for every input.
 * Short ASCII strings (`$owner`, `$$NOW`) come from the key table: one string object each,
 * which the expression compiler then compares by identity.
 */
function readString(bytes: Buffer, start: number, end: number): string {
  if (end - start <= MAX_SHARED_STRING_BYTES) {
    let hash = 0x811c9dc5;
    let i = start;
    for (; i < end && bytes[i] < 0x80; i++) hash = Math.imul(hash ^ bytes[i], 0x01000193);
    if (i === end) return asciiKey(bytes, start, end, hash >>> 0);
  }
  return bytes.toString('utf8', start, end);
}

/** js-bson's own call: ObjectId's constructor takes an offset, which its types do not say. */
const ObjectIdAt = ObjectId as unknown as new (bytes: Buffer, offset: number) => ObjectId;

/** The value `readValue` read last (returning it with its end would allocate a pair). */
let decodedValue: unknown;

/** Reads one value of `type` at `index` into `decodedValue`; its end, or -1 to give up. */
function readValue(bytes: Buffer, type: number, index: number, end: number): number {
  switch (type) {
    case 0x01: // double
      if (index + 8 > end) return -1;
      decodedValue = bytes.readDoubleLE(index);
      return index + 8;
    case 0x02: {
      // string: length with its terminating 0, which must be there
      const size = bytes.readInt32LE(index);
      const from = index + 4;
      if (size <= 0 || size > end - from || bytes[from + size - 1] !== 0) return -1;
      decodedValue = readString(bytes, from, from + size - 1);
      return from + size;
    }
    case 0x03:
    case 0x04: {
      // document, array
      const size = bytes.readInt32LE(index);
      if (size < 5 || size > end - index || bytes[index + size - 1] !== 0) return -1;
      const value = type === 0x03 ? decodeDocument(bytes, index) : decodeArray(bytes, index);
      if (value === GIVE_UP) return -1;
      decodedValue = value;
      return index + size;
    }
    case 0x05: {
      // binary; subtype 2 (the old one, with a second length) is left to js-bson
      const size = bytes.readInt32LE(index);
      const subtype = bytes[index + 4];
      const from = index + 5;
      if (size < 0 || size > end - from || subtype === 2) return -1;
      const binary = new Binary(bytes.subarray(from, from + size), subtype);
      decodedValue = subtype === 4 && UUID.isValid(binary) ? binary.toUUID() : binary;
      return from + size;
    }
    case 0x07:
      if (index + 12 > end) return -1;
      decodedValue = new ObjectIdAt(bytes, index);
      return index + 12;
    case 0x08: {
      const flag = bytes[index];
      if (index + 1 > end || (flag !== 0 && flag !== 1)) return -1;
      decodedValue = flag === 1;
      return index + 1;
    }
    case 0x09: // UTC datetime, as js-bson's Long.toNumber
      if (index + 8 > end) return -1;
      decodedValue = new Date(bytes.readInt32LE(index + 4) * TWO_TO_32 + bytes.readUInt32LE(index));
      return index + 8;
    case 0x0a:
      decodedValue = null;
      return index;
    case 0x10:
      if (index + 4 > end) return -1;
      decodedValue = bytes.readInt32LE(index);
      return index + 4;
    case 0x11:
      if (index + 8 > end) return -1;
      decodedValue = new Timestamp({
        i: bytes.readUInt32LE(index),
        t: bytes.readUInt32LE(index + 4),
      });
      return index + 8;
    case 0x12: {
      if (index + 8 > end) return -1;
      const high = bytes.readInt32LE(index + 4);
      if (high < -SAFE_HIGH_WORD || high >= SAFE_HIGH_WORD) return -1;
      decodedValue = high * TWO_TO_32 + bytes.readUInt32LE(index);
      return index + 8;
    }
    default:
      // undefined, regex, DBPointer, code, symbol, code with scope, decimal128, min/max key
      return -1;
  }
}
