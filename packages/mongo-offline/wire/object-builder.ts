import type { Document } from 'bson';

/**
 * Building decoded documents cheaply. Adding properties one by one to `{}` (what js-bson does)
 * goes through V8's generic keyed stores and map transitions for every field; an object
 * literal of known keys is created in one step. A command repeats the same few key lists
 * (`{$cond: ...}`, `{input, cond}`, `{_id}`...) thousands of times a second, so each list seen
 * twice gets a function returning such a literal. Both tables below have a fixed number of
 * slots, so memory stays bounded whatever keys clients send: the key table is direct-mapped
 * (a newcomer replaces the slot's entry), the factory table two-way (see `buildDocument`).
 */

const KEY_SLOTS = 4096;
const MAX_CACHED_KEY_BYTES = 32;
const keySlots: Array<string | undefined> = new Array<string | undefined>(KEY_SLOTS);

/**
 * The key in bytes `[start, end)` (ASCII, `hash` its FNV-1a hash), as the same string object
 * as last time when it is in its slot: a string V8 has already internalized as a property name.
 */
export function asciiKey(bytes: Buffer, start: number, end: number, hash: number): string {
  const length = end - start;
  if (length > MAX_CACHED_KEY_BYTES) return bytes.toString('latin1', start, end);
  const slot = hash & (KEY_SLOTS - 1);
  const cached = keySlots[slot];
  if (cached !== undefined && cached.length === length) {
    let same = true;
    for (let i = 0; i < length; i++) {
      if (cached.charCodeAt(i) !== bytes[start + i]) {
        same = false;
        break;
      }
    }
    if (same) return cached;
  }
  const key = bytes.toString('latin1', start, end);
  keySlots[slot] = key;
  return key;
}

type Factory = (values: unknown[], base: number) => Document;

interface FactoryEntry {
  keys: string[];
  /** Undefined until the key list is seen a second time: one-off lists are not compiled. */
  create: Factory | undefined;
}

const FACTORY_SLOTS = 1024;
const MAX_FACTORY_KEYS = 24;
const factorySlots: Array<FactoryEntry | undefined> = new Array<FactoryEntry | undefined>(
  FACTORY_SLOTS,
);

function sameKeys(known: string[], keys: string[], base: number, top: number): boolean {
  if (known.length !== top - base) return false;
  for (let i = 0; i < known.length; i++) if (known[i] !== keys[base + i]) return false;
  return true;
}

/** What js-bson does: plain assignment, `__proto__` as an own property. */
function assignOneByOne(keys: string[], values: unknown[], base: number, top: number): Document {
  const document: Document = {};
  for (let i = base; i < top; i++) {
    if (keys[i] === '__proto__') {
      Object.defineProperty(document, '__proto__', {
        value: values[i],
        writable: true,
        enumerable: true,
        configurable: true,
      });
    } else {
      document[keys[i]] = values[i];
    }
  }
  return document;
}

/**
 * Only lists an object literal builds exactly as assignment does: no `__proto__` (a literal
 * would set the prototype) and no repeated key.
 */
function literalFits(keys: string[]): boolean {
  return (
    keys.length <= MAX_FACTORY_KEYS &&
    !keys.includes('__proto__') &&
    new Set(keys).size === keys.length
  );
}

let factoryCompiles = 0;

/** Functions compiled so far (for tests: a key list seen again is not compiled again). */
export function factoryCompileCount(): number {
  return factoryCompiles;
}

function compileFactory(keys: string[]): Factory {
  // JSON.stringify quotes any string as a valid JavaScript string literal: keys come from
  // the network but can only ever be property names here.
  const fields = keys.map((key, i) => `${JSON.stringify(key)}: values[base + ${i}]`).join(', ');
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- see the module comment
  return new Function('values', 'base', `return { ${fields} };`) as Factory;
}

/**
 * The document with keys `keys[base..top)` and their values, in this order (`hash` identifies
 * the key list); the same object as assigning them one by one to `{}`.
 */
export function buildDocument(
  keys: string[],
  values: unknown[],
  base: number,
  top: number,
  hash: number,
): Document {
  // Two places per key list: two lists that share one (a lock command's `{vars, in}` and
  // `{weight, since, expiresAt, holder}` did) each keep their compiled function instead of
  // evicting each other's and compiling anew on every command.
  const first = hash & (FACTORY_SLOTS - 1);
  const second = (hash >>> 10) & (FACTORY_SLOTS - 1);
  let entry = factorySlots[first];
  if (entry === undefined || !sameKeys(entry.keys, keys, base, top)) entry = factorySlots[second];
  if (entry !== undefined && sameKeys(entry.keys, keys, base, top)) {
    if (entry.create) return entry.create(values, base);
    if (literalFits(entry.keys)) {
      entry.create = compileFactory(entry.keys);
      factoryCompiles += 1;
      return entry.create(values, base);
    }
  } else {
    // A newcomer takes a place that is empty or not compiled yet, else the first.
    const secondFree = factorySlots[second]?.create === undefined;
    const place = factorySlots[first]?.create !== undefined && secondFree ? second : first;
    factorySlots[place] = { keys: keys.slice(base, top), create: undefined };
  }
  return assignOneByOne(keys, values, base, top);
}
