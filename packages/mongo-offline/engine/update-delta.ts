import { BSON, type Document } from 'bson';
import { isPlainObject, same, type UpdateDescription } from './update-description';

/**
 * How MongoDB logs a pipeline update, which decides its change event. A mongod computes the
 * update's delta (its v2 oplog diff: `doc_diff::computeOplogDiff`) and logs the document whole
 * instead, streamed as `replace`, when the delta plus the 15 bytes of `{ $v: 2, diff }` is not
 * smaller than the new document. Inside, a changed embedded document or array whose own delta
 * is not smaller than its new value is logged whole as an updated field.
 */
const DELTA_ENTRY_PADDING = 15;

interface DocumentDelta {
  readonly kind: 'document';
  /** Removed fields, in MongoDB's order: the trailing ones, then those passed over, sorted. */
  readonly deleted: string[];
  readonly updated: Array<[string, unknown]>;
  readonly inserted: Array<[string, unknown]>;
  readonly nested: Array<[string, Delta]>;
}

interface ArrayDelta {
  readonly kind: 'array';
  readonly updated: Array<[number, unknown]>;
  readonly nested: Array<[number, Delta]>;
  /** The new length, when the array shrank. */
  newSize?: number;
}

type Delta = DocumentDelta | ArrayDelta;

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

/** The delta, or `undefined` if it (plus `padding`) is not smaller than `post`. */
function documentDelta(pre: Document, post: Document, padding = 0): DocumentDelta | undefined {
  const delta: DocumentDelta = {
    kind: 'document',
    deleted: [],
    updated: [],
    inserted: [],
    nested: [],
  };
  const preNames = Object.keys(pre);
  const postNames = Object.keys(post);
  // Fields met out of place: removed unless they turn up later in `post`.
  const passedOver = new Set<string>();
  let i = 0;
  let j = 0;
  for (; i < preNames.length && j < postNames.length; i++) {
    const name = preNames[i];
    if (name !== postNames[j]) {
      passedOver.add(name);
      continue;
    }
    j++;
    if (same(pre[name], post[name])) continue;
    const nested = nestedDelta(pre[name], post[name]);
    if (nested) delta.nested.push([name, nested]);
    else delta.updated.push([name, post[name]]);
  }
  for (; i < preNames.length; i++) delta.deleted.push(preNames[i]);
  for (; j < postNames.length; j++) {
    delta.inserted.push([postNames[j], post[postNames[j]]]);
    passedOver.delete(postNames[j]);
  }
  delta.deleted.push(...[...passedOver].sort());
  return sizeOf(delta) + padding < BSON.calculateObjectSize(post) ? delta : undefined;
}

function arrayDelta(pre: unknown[], post: unknown[]): ArrayDelta | undefined {
  const delta: ArrayDelta = { kind: 'array', updated: [], nested: [] };
  for (let i = 0; i < post.length; i++) {
    if (i < pre.length && same(pre[i], post[i])) continue;
    const nested = i < pre.length ? nestedDelta(pre[i], post[i]) : undefined;
    if (nested) delta.nested.push([i, nested]);
    else delta.updated.push([i, post[i]]);
  }
  if (pre.length > post.length) delta.newSize = post.length;
  return sizeOf(delta) < BSON.calculateObjectSize({ ...post }) ? delta : undefined;
}

/** Two documents, or two arrays: their delta, if it is the smaller. Else the value goes whole. */
function nestedDelta(pre: unknown, post: unknown): Delta | undefined {
  if (isPlainObject(pre) && isPlainObject(post)) return documentDelta(pre, post);
  if (Array.isArray(pre) && Array.isArray(post)) return arrayDelta(pre, post);
  return undefined;
}

/** The delta as the oplog holds it: `{ d, u, i, s<field> }`, or `{ a: true, l, u<n>, s<n> }`. */
function serialize(delta: Delta): Document {
  if (delta.kind === 'array') {
    return {
      a: true,
      ...(delta.newSize === undefined ? {} : { l: delta.newSize }),
      ...Object.fromEntries(delta.updated.map(([index, value]) => [`u${index}`, value])),
      ...Object.fromEntries(delta.nested.map(([index, child]) => [`s${index}`, serialize(child)])),
    };
  }
  const section = (entries: Array<[string, unknown]>) =>
    entries.length === 0 ? {} : Object.fromEntries(entries);
  const out: Document = {};
  if (delta.deleted.length > 0) out.d = section(delta.deleted.map((name) => [name, false]));
  if (delta.updated.length > 0) out.u = section(delta.updated);
  if (delta.inserted.length > 0) out.i = section(delta.inserted);
  for (const [name, child] of delta.nested) out[`s${name}`] = serialize(child);
  return out;
}

const sizeOf = (delta: Delta) => BSON.calculateObjectSize(serialize(delta));

/** The change stream's reading of a delta (deletions, updates and insertions, then nested). */
function describe(delta: Delta, path: string, out: UpdateDescription): void {
  if (delta.kind === 'array') {
    if (delta.newSize !== undefined)
      out.truncatedArrays.push({ field: path, newSize: delta.newSize });
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
