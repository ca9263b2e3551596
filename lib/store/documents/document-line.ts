import type { Document } from 'mongodb';
import { isPlainObject } from '../../util/value-kinds';
import { LINE_CAPACITY } from '../line/line-pipelines';
import type { Successor } from '../line/line-commands';

/** A number as `$isNumber` sees one, read back with any of the driver's options. */
export function isBsonNumber(value: unknown): boolean {
  if (typeof value === 'number' || typeof value === 'bigint') return true;
  // By BSON type, not class: a Timestamp is a Long subclass, and no number.
  const type = (value as { _bsontype?: unknown } | null | undefined)?._bsontype;
  return type === 'Long' || type === 'Int32' || type === 'Double' || type === 'Decimal128';
}

/** What {@link DocumentLineFields.lockShaped} checks on the server, for a value read back. */
export function isLockShaped(value: unknown): boolean {
  if (value === undefined || value === null) return true;
  // A subdocument reads back as a plain object; a date, a DBRef or any other BSON value does not.
  if (!isPlainObject(value)) return false;
  const { line, f } = value as { line?: unknown; f?: unknown };
  return (line === undefined || Array.isArray(line)) && (f === undefined || isBsonNumber(f));
}

/**
 * Engine v2's document lock: the key's line (see `line-document.ts`) in the user's document,
 * as the lock field `{ f, line, lead }`: exclusive entries only, no past owners, no `gcAt` (the
 * application owns its documents). Each pipeline rewrites the lock field alone, or nothing.
 * Values go in as literals: a commit's stage runs in the caller's own update pipeline.
 */
export class DocumentLineFields {
  constructor(readonly field: string) {}

  path(name: 'f' | 'line' | 'lead'): string {
    return `${this.field}.${name}`;
  }

  private value(name: 'f' | 'line' | 'lead' | 'c' | 'owner' | 'holder' | 'expiresAt'): string {
    return `$${this.field}.${name}`;
  }

  get live(): Document {
    const line = this.value('line');
    return {
      $filter: {
        input: { $cond: [{ $isArray: line }, line, []] },
        cond: { $gt: ['$$this.e', '$$NOW'] },
      },
    };
  }

  /**
   * The lock field is missing, null or `{ line?: array, f?: number }`; anything else is the
   * application's own value, never written over.
   */
  get lockShaped(): Document {
    const type = { $type: `$${this.field}` };
    return {
      $or: [
        { $in: [type, ['missing', 'null']] },
        {
          $and: [
            { $eq: [type, 'object'] },
            // A DBRef is a subdocument too, but the application's value ({ $ref, $id }).
            {
              $eq: [
                { $type: { $getField: { field: { $literal: '$ref' }, input: `$${this.field}` } } },
                'missing',
              ],
            },
            { $in: [{ $type: this.value('line') }, ['missing', 'array']] },
            {
              $or: [
                { $eq: [{ $type: this.value('f') }, 'missing'] },
                { $isNumber: this.value('f') },
              ],
            },
          ],
        },
      ],
    };
  }

  /** A live lease of the lock field's 0.1 form (engine v1), which v2 must not pass over. */
  get heldInV1Form(): Document {
    return {
      $and: [
        { $ne: [{ $ifNull: [this.value('owner'), null] }, null] },
        { $gt: [this.value('expiresAt'), '$$NOW'] },
      ],
    };
  }

  /** Someone holds the document: a live entry leads the line (or a 0.1 lease is live). */
  get held(): Document {
    return { $or: [{ $gt: [{ $size: this.live }, 0] }, this.heldInV1Form] };
  }

  /** `token`'s entry holds: it is the first live one. */
  ownedBy(token: string): Document {
    return { $eq: [this.first('t'), { $literal: token }] };
  }

  /** The holder id of the first live entry (or of a live lease in the 0.1 form). */
  get holder(): Document {
    return {
      $ifNull: [this.first('h'), { $cond: [this.heldInV1Form, this.value('holder'), null] }],
    };
  }

  /** The first live entry's remaining lease (or a live 0.1 lease's), in ms. */
  get remainingMs(): Document {
    const v1End = { $cond: [this.heldInV1Form, this.value('expiresAt'), '$$NOW'] };
    return { $max: [0, { $subtract: [{ $ifNull: [this.first('e'), v1End] }, '$$NOW'] }] };
  }

  /**
   * A commit's filter and operators: `next` must still be the live entry behind ours (`null`:
   * none); it is named leader, so only its process hears (alone: `- <token>`, see `leaveStage`).
   */
  unlockBefore(token: string, next: Successor | null): { filter: Document; operators: Document } {
    const behind = { $let: { vars: { l: this.live }, in: { $arrayElemAt: ['$$l.t', 1] } } };
    return {
      filter: {
        $expr: next ? { $eq: [behind, { $literal: next.t }] } : { $eq: [{ $size: this.live }, 1] },
      },
      operators: this.leaveOperators(token, next ? `${next.h} ${next.t}` : `- ${token}`),
    };
  }

  private first(name: 't' | 'h' | 'e'): Document {
    return { $let: { vars: { l: this.live }, in: { $first: `$$l.${name}` } } };
  }

  /**
   * Joins the line, or writes nothing: the token is in it already (a retry), the line is full, a
   * 0.1 lease is live, or (`onlyIfHolds`) anyone is in line. The first join drops the 0.1 fields.
   * Fences never go below the server clock in ms, so a re-created document's fences still grow.
   */
  joinStage(request: { token: string; holderId: string; ttlMs: number; onlyIfHolds: boolean }) {
    const token = { $literal: request.token };
    const joins = {
      $and: [
        this.lockShaped,
        { $not: [this.heldInV1Form] },
        { $not: [{ $in: [token, '$$l.t'] }] },
        { $lt: [{ $size: '$$l' }, LINE_CAPACITY] },
        ...(request.onlyIfHolds ? [{ $eq: ['$$l', []] }] : []),
      ],
    };
    const entry = {
      t: token,
      f: '$$n',
      e: { $add: ['$$NOW', request.ttlMs] },
      h: { $literal: request.holderId },
      // Made by this join's upsert (see `createdMark`): a retry whose reply was lost reads it.
      c: { $cond: [{ $eq: [this.value('c'), true] }, true, '$$REMOVE'] },
    };
    const joined = {
      f: '$$n',
      line: { $concatArrays: ['$$l', [entry]] },
      lead: this.value('lead'),
    };
    const fence = { $cond: [{ $isNumber: this.value('f') }, { $toLong: this.value('f') }, 0] };
    const next = { $max: [{ $add: [fence, 1] }, { $toLong: '$$NOW' }] };
    return {
      $set: {
        [this.field]: {
          $let: {
            vars: { l: this.live, n: next },
            in: { $cond: [joins, joined, `$${this.field}`] },
          },
        },
      },
    };
  }

  /**
   * Leaves the line, dropping dead entries. `lead` names the new leader (`<holder> <token>`) for
   * the change streams' filters, or, with nobody left, `- <our token>`: a change `events$` and
   * `waitForRelease` see and waiting processes' streams skip.
   */
  leaveStage(token: string): Document {
    const rest = {
      $filter: {
        input: { $ifNull: [this.value('line'), []] },
        cond: {
          $and: [{ $gt: ['$$this.e', '$$NOW'] }, { $ne: ['$$this.t', { $literal: token }] }],
        },
      },
    };
    const lead = {
      $let: {
        vars: { x: { $first: '$$r' } },
        in: { $cond: ['$$x', { $concat: ['$$x.h', ' ', '$$x.t'] }, `- ${token}`] },
      },
    };
    return {
      $set: {
        [this.field]: {
          $let: { vars: { r: rest }, in: { f: this.value('f'), line: '$$r', lead } },
        },
      },
    };
  }

  /**
   * The update operators that end `token`'s entry, for a commit written as an update document.
   * Without a pipeline to drop dead entries or find the next leader, `lead` defaults to `*`:
   * every process looks.
   */
  leaveOperators(token: string, lead = `* ${token}`): Document {
    return { $pull: { [this.path('line')]: { t: token } }, $set: { [this.path('lead')]: lead } };
  }

  /** Renews `token`'s lease to `ttlMs` from now (not earlier unless `exactly`); drops dead ones. */
  renewStage(token: string, ttlMs: number, exactly: boolean): Document {
    const end = { $add: ['$$NOW', ttlMs] };
    const renewed = {
      $map: {
        input: this.live,
        in: {
          $cond: [
            { $eq: ['$$this.t', { $literal: token }] },
            { $mergeObjects: ['$$this', { e: exactly ? end : { $max: ['$$this.e', end] } }] },
            '$$this',
          ],
        },
      },
    };
    return {
      $set: { [this.field]: { f: this.value('f'), line: renewed, lead: this.value('lead') } },
    };
  }

  /**
   * The lock field of a document an upsert creates: `c` marks it made by the join that follows
   * in the same command (`joinStage` moves it into the entry).
   */
  get createdMark(): Document {
    return { [this.field]: { c: true } };
  }

  strip<T extends Document>(document: T): T {
    const { [this.field]: _lock, ...rest } = document;
    return rest as T;
  }
}
