import { BSON, type Document } from 'bson';
import { isPlainObject, same, type UpdateDescription } from './update-description';

/**
 * How MongoDB logs a pipeline update, which decides its change event. A mongod computes the
 * update's delta (its v2 oplog diff: `doc_diff::computeOplogDiff`) and logs the document whole
 * instead, streamed as `replace`, when the delta plus the 15 bytes of `{ $v: 2, diff }` is not
 * smaller than the new document. Inside, a changed embedded document or array whose own delta
 * is not smaller than its new value is logged whole as an updated field.
 *
 * Deltas are `{ d: { f: false }, u: { f: v }, i: { f: v }, s<f>: delta }` for a document and
 * `{ a: true, l: length, u<n>: v, s<n>: delta }` for an array; their BSON size is counted as
 * entries are added (as a mongod does), and a delta that outgrows its value is given up at once.
 */
const DELTA_ENTRY_PADDING = 15;

interface DocumentDelta {
  readonly kind: 'document';
  /** Removed fields, in MongoDB's order: the trailing ones, then those passed over, sorted. */
  readonly deleted: string[];
  readonly updated: Array<[string, unknown]>;
  readonly inserted: Array<[string, unknown]>;
  readonly nested: Array<[string, Delta]>;
  size: number;
}

interface ArrayDelta {
  readonly kind: 'array';
  readonly updated: Array<[number, unknown]>;
  readonly nested: Array<[number, Delta]>;
  /** The new length, when the array shrank. */
  newSize?: number;
  size: number;
}

type Delta = DocumentDelta | ArrayDelta;

/** An empty BSON document: its length and terminator. */
const EMPTY_SIZE = 5;
/** A section's first entry opens it: type byte, one-letter name and its NUL, an empty document. */
const SECTION_SIZE = 3 + EMPTY_SIZE;

/** The BSON size of one element `name: value`. */
const elementSize = (name: string, value: unknown) =>
  BSON.calculateObjectSize({ [name]: value }) - EMPTY_SIZE;

/** An embedded delta's element: type byte, name and NUL, then the delta itself. */
const nestedSize = (name: string, delta: Delta) => 2 + name.length + delta.size;

/**
 * The change event of a pipeline update: its description (an `update` event), or `undefined`
 * when MongoDB logs the document whole (a `replace` event).
 */
export function describePipelineUpdate(
  before: Document,
  after: Document,
): UpdateDescription | undefined {
  const delta = documentDelta(before, after, DELTA_ENTRY_PADDING);
  if (!delta) return undefined;
  const description: UpdateDescription = {
    updatedFields: {},
    removedFields: [],
    truncatedArrays: [],
  };
  describe(delta, '', description);
  return description;
}

/** The delta, or `undefined` once it (plus `padding`) is not smaller than `post`. */
function documentDelta(pre: Document, post: Document, padding = 0): DocumentDelta | undefined {
  const limit = BSON.calculateObjectSize(post);
  const delta: DocumentDelta = {
    kind: 'document',
    deleted: [],
    updated: [],
    inserted: [],
    nested: [],
    size: EMPTY_SIZE + padding,
  };
  const add = (section: unknown[], size: number) => {
    delta.size += size + (section.length === 0 ? SECTION_SIZE : 0);
  };
  const remove = (name: string) => {
    add(delta.deleted, elementSize(name, false));
    delta.deleted.push(name);
  };
  const preNames = Object.keys(pre);
  const postNames = Object.keys(post);
  // Fields met out of place: removed unless they turn up later in `post`.
  const passedOver = new Set<string>();
  let i = 0;
  let j = 0;
  for (; i < preNames.length && j < postNames.length; i++) {
    if (delta.size >= limit) return undefined;
    const name = preNames[i];
    if (name !== postNames[j]) {
      passedOver.add(name);
      continue;
    }
    j++;
    if (same(pre[name], post[name])) continue;
    const nested = nestedDelta(pre[name], post[name]);
    if (nested) {
      delta.size += nestedSize(`s${name}`, nested);
      delta.nested.push([name, nested]);
    } else {
      add(delta.updated, elementSize(name, post[name]));
      delta.updated.push([name, post[name]]);
    }
  }
  for (; i < preNames.length; i++) remove(preNames[i]);
  for (; j < postNames.length; j++) {
    add(delta.inserted, elementSize(postNames[j], post[postNames[j]]));
    delta.inserted.push([postNames[j], post[postNames[j]]]);
    passedOver.delete(postNames[j]);
  }
  for (const name of [...passedOver].sort()) remove(name);
  return delta.size < limit ? delta : undefined;
}

function arrayDelta(pre: unknown[], post: unknown[]): ArrayDelta | undefined {
  const limit = BSON.calculateObjectSize(post);
  // `a: true`.
  const delta: ArrayDelta = { kind: 'array', updated: [], nested: [], size: EMPTY_SIZE + 4 };
  for (let i = 0; i < post.length; i++) {
    if (delta.size >= limit) return undefined;
    if (i < pre.length && same(pre[i], post[i])) continue;
    const nested = i < pre.length ? nestedDelta(pre[i], post[i]) : undefined;
    if (nested) {
      delta.size += nestedSize(`s${i}`, nested);
      delta.nested.push([i, nested]);
    } else {
      delta.size += elementSize(`u${i}`, post[i]);
      delta.updated.push([i, post[i]]);
    }
  }
  if (pre.length > post.length) {
    delta.size += elementSize('l', post.length);
    delta.newSize = post.length;
  }
  return delta.size < limit ? delta : undefined;
}

/** Two documents, or two arrays: their delta, if it is the smaller. Else the value goes whole. */
function nestedDelta(pre: unknown, post: unknown): Delta | undefined {
  if (isPlainObject(pre) && isPlainObject(post)) return documentDelta(pre, post);
  if (Array.isArray(pre) && Array.isArray(post)) return arrayDelta(pre, post);
  return undefined;
}

/** The change stream's reading of a delta (deletions, updates and insertions, then nested). */
function describe(delta: Delta, path: string, out: UpdateDescription): void {
  if (delta.kind === 'array') {
    if (delta.newSize !== undefined) {
      out.truncatedArrays.push({ field: path, newSize: delta.newSize });
    }
    for (const [index, value] of delta.updated) out.updatedFields[`${path}.${index}`] = value;
    for (const [index, child] of delta.nested) describe(child, `${path}.${index}`, out);
    return;
  }
  const under = (name: string) => (path ? `${path}.${name}` : name);
  for (const name of delta.deleted) out.removedFields.push(under(name));
  for (const [name, value] of [...delta.updated, ...delta.inserted]) {
    out.updatedFields[under(name)] = value;
  }
  for (const [name, child] of delta.nested) describe(child, under(name), out);
}
