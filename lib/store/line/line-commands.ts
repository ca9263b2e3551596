import { randomBytes } from 'node:crypto';
import { Long, ObjectId } from 'mongodb';
import type { ClientSession, Collection, Document } from 'mongodb';
import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error';
import { isDuplicateKeyError } from '../mongo-error-codes';
import type { HoldingEntry, LineDocument, LineEntry, LineKind, LinePlace } from './line-document';
import {
  FENCES_PER_ENTRY,
  blockingHolder,
  holdersOf,
  holdingEntry,
  liveEntries,
  placeOf,
} from './line-document';
import {
  EXPIRE_PIPELINE,
  LEAVE_PIPELINE,
  LINE_CAPACITY,
  LINE_REPLY,
  LOCK_LINE_REPLY,
  RENEW_PIPELINE,
  exclusiveJoinFilter,
  exclusiveJoinPipeline,
  exclusiveTryJoinPipeline,
  joinPipeline,
} from './line-pipelines';

/** A document lock's conditions on its document, checked by its join. */
export interface AttemptTarget {
  /** Extra conditions on the document (a tenant, say); not met = not found. */
  where?: Record<string, unknown>;
  /** Insert the document with these fields when no document has the id. */
  createIfMissing?: Record<string, unknown>;
}

/** Join, leave and renew: one `findOneAndUpdate` each. Only `store/line` knows the document. */

export type LineCollection = Collection<LineDocument>;

/** A `let` value: a string is an expression, so one that starts with `$` must be quoted. */
function literal(value: string): string | { $literal: string } {
  return value.startsWith('$') ? { $literal: value } : value;
}

type LineReply = LineDocument & { now: Date };

/**
 * The server time to decode a reply by: its `$$NOW`. A retried write that had landed replies
 * without the projection (SERVER-31242): then the time our lease was set from, else the
 * server's time read now; later is the safe side (fewer live entries, less lease left).
 */
export async function timeOf(
  collection: LineCollection,
  key: string,
  doc: { line?: readonly { t?: string; e: Date }[]; now?: Date },
  ours?: { token: string; ttlMs: number },
): Promise<Date> {
  if (doc.now instanceof Date) return doc.now;
  const entry = ours && doc.line?.find((candidate) => candidate.t === ours.token);
  if (entry && ours) return new Date(entry.e.getTime() - ours.ttlMs);
  const projection = { _id: 1, now: '$$NOW' };
  const read = await collection.findOne<{ now?: Date }>({ _id: key }, { projection });
  // The document is gone: nothing of it is live.
  return read?.now ?? new Date(8.64e15);
}

/** Values a caller's options have checked already; a store must not trust them. */
export function checkJoin({ ttlMs, kind, idleRetentionMs }: JoinRequest): void {
  const bad = (option: string, value: unknown, range: string) =>
    new InvalidLockOptionsError(`${option} must be ${range}, got ${String(value)}`, { option });
  if (!Number.isInteger(ttlMs) || ttlMs < 1) throw bad('ttlMs', ttlMs, 'a positive integer');
  if (!Number.isInteger(idleRetentionMs) || idleRetentionMs < 0) {
    throw bad('idleRetentionMs', idleRetentionMs, 'a non-negative integer');
  }
  if (kind.mode !== 'permits') return;
  if (!Number.isInteger(kind.permits) || kind.permits < 1) {
    throw bad('permits', kind.permits, 'a positive integer');
  }
  if (!Number.isInteger(kind.weight) || kind.weight < 1 || kind.weight > kind.permits) {
    throw bad('weight', kind.weight, `an integer from 1 to permits (${kind.permits})`);
  }
}

export interface JoinRequest {
  key: string;
  /** A retry with the same token finds the entry it may have made. */
  token: string;
  holderId: string;
  ttlMs: number;
  kind: LineKind;
  /** Join only if the entry holds at once (`tryAcquire`); else join and wait in line. */
  onlyIfHolds: boolean;
  scope?: string;
  /** Ms an idle document stays after the last lease ends (then the TTL index removes it). */
  idleRetentionMs: number;
  target?: AttemptTarget;
}

/** A document lock's document as the write that made its entry hold read it. */
export interface HeldDocument {
  /** Without the lock field. */
  doc: Document;
  /** True when `createIfMissing` inserted it. */
  created: boolean;
  /** Read from the change event that made our entry hold: not checked by `where`. */
  fromEvent?: boolean;
  /** The entry behind ours when it was read (`null`: none), for the commit to name. */
  next?: Successor | null;
}

/** The entry a leave makes the new leader. */
export interface Successor {
  t: string;
  h: string;
}

/** How a key is in use, as a refused join's reply tells it. */
export interface KeyInUse {
  exclusiveLive: boolean;
  /** The semaphore's permits (outliving its holders), or null for a lock. */
  permits: number | bigint | null;
}

export type JoinResult =
  | ({ joined: true; document?: HeldDocument } & LinePlace)
  | {
      joined: false;
      /** `held`: would not hold at once; `kind`: in use in another form; `full`: at capacity. */
      reason: 'held' | 'kind' | 'full';
      /**
       * Until the request could hold, as far as the holders' leases tell (`blockingHolder`),
       * and the service of the holder whose lease end that is.
       */
      holderId: string | undefined;
      retryAfterMs: number | undefined;
      inUse: KeyInUse;
    };

export async function joinLine(
  collection: LineCollection,
  request: JoinRequest,
  retry = false,
): Promise<JoinResult> {
  checkJoin(request);
  // A retry of a join that may have landed would miss the short command's filter (`line.t`).
  const short = request.kind.mode === 'exclusive' && !retry;
  const shape = {
    kind: request.kind.mode,
    onlyIfHolds: request.onlyIfHolds,
    scoped: request.scope !== undefined,
  };
  const doc =
    (short ? await exclusiveJoin(collection, request) : undefined) ??
    (await sendJoin(collection, request, joinPipeline(shape)));
  return decodeJoin(doc, request);
}

/** A mutex's join by short commands; undefined leaves rarer cases to the full pipeline. */
async function exclusiveJoin(
  collection: LineCollection,
  request: JoinRequest,
): Promise<LineReply | undefined> {
  const scoped = request.scope !== undefined;
  if (request.onlyIfHolds) {
    const doc = await sendJoin(collection, request, exclusiveTryJoinPipeline(scoped));
    // Nobody live: not joined, as the key was last a semaphore's.
    return liveEntries(doc.line, doc.now).length > 0 ? doc : undefined;
  }
  try {
    return await sendJoin(
      collection,
      request,
      exclusiveJoinPipeline(scoped),
      exclusiveJoinFilter(request.key, request.token),
      LOCK_LINE_REPLY,
    );
  } catch (error) {
    // Not the usual case: the filter missed, so the upsert's insert found the key taken.
    if (isDuplicateKeyError(error)) return undefined;
    throw error;
  }
}

async function sendJoin(
  collection: LineCollection,
  request: JoinRequest,
  pipeline: Document[],
  filter: Document = { _id: request.key },
  projection: Document = LINE_REPLY,
): Promise<LineReply> {
  const { kind } = request;
  const reply = await collection.findOneAndUpdate(filter, pipeline, {
    upsert: true,
    returnDocument: 'after',
    projection,
    let: {
      t: literal(request.token),
      h: literal(request.holderId),
      d: request.ttlMs,
      g: request.ttlMs + request.idleRetentionMs,
      ...(kind.mode === 'permits' ? { n: kind.permits, w: kind.weight } : {}),
      ...(request.scope === undefined ? {} : { s: literal(request.scope) }),
    },
  });
  // An upsert always returns the document.
  const doc = reply as LineReply;
  return { ...doc, now: await timeOf(collection, request.key, doc, request) };
}

/** A join's result from the document after it, at the join's server time. */
export function decodeJoin(
  doc: LineReply,
  request: Pick<JoinRequest, 'kind' | 'token'>,
): JoinResult {
  const { kind } = request;
  const place = placeOf(doc, request.token, doc.now);
  if (place) return { joined: true, ...place };
  const live = liveEntries(doc.line, doc.now);
  const [first] = holdersOf(doc, doc.now);
  const inOtherForm =
    live.length > 0 &&
    (kind.mode === 'permits' ? doc.permits !== kind.permits : doc.permits !== undefined);
  const blocker = blockingHolder(live, doc.permits, kind.mode === 'permits' ? kind.weight : 1);
  return {
    joined: false,
    reason: inOtherForm ? 'kind' : live.length >= LINE_CAPACITY ? 'full' : 'held',
    holderId: blocker?.h,
    retryAfterMs: blocker ? blocker.e.getTime() - doc.now.getTime() : undefined,
    inUse: {
      exclusiveLive: first !== undefined && first.m !== 's' && doc.permits === undefined,
      permits: doc.permits ?? null,
    },
  };
}

export interface LeaveResult {
  /** Our entry was in the line and live until this write. */
  left: boolean;
  /** The holders after it, in line order (a local successor starts at once). */
  holders: (HoldingEntry & Pick<LineEntry, 'h'>)[];
}

/** Leaves the line: a release, or a waiter that gives up. Idempotent by token. */
export async function leaveLine(
  collection: LineCollection,
  key: string,
  token: string,
): Promise<LeaveResult> {
  return (await leaveLineTogether(collection, key, [token]))[0];
}

/**
 * Entries of ours leave `key`'s line in one write (leaves asked for together, such as a
 * `releaseAllHeld` of many shared holders), each given the result it would have alone.
 */
export async function leaveLineTogether(
  collection: LineCollection,
  key: string,
  tokens: readonly string[],
): Promise<LeaveResult[]> {
  const before = (await collection.findOneAndUpdate(
    { _id: key, 'line.t': tokens.length === 1 ? tokens[0] : { $in: tokens } },
    LEAVE_PIPELINE,
    {
      returnDocument: 'before',
      projection: LINE_REPLY,
      // `$$t` names the write in a shared or semaphore `lead`: a lone leave's own token; a
      // batch's, a new name, since its first token may have left already (a retry) and its
      // `lead` be the current one (unchanged, heard by nobody).
      let: { t: literal(tokens.length === 1 ? tokens[0] : leaveName()), ts: { $literal: tokens } },
    },
  )) as LineReply | null;
  if (!before) return tokens.map(() => ({ left: false, holders: [] }));
  const now = await timeOf(collection, key, before);
  // A retried write's reply has no time of its own (see `timeOf`): a later one would count
  // entries live at the write as dead and name false holders. The change stream tells them.
  const holders = before.now instanceof Date ? holdersAfter(before, tokens, now) : [];
  return tokens.map((token) => ({ left: placeOf(before, token, now) !== undefined, holders }));
}

/** A batch of leaves' name in `lead`: new per write (a driver's retry resends it). */
function leaveName(): string {
  return randomBytes(12).toString('base64url');
}

/** A leave's result from the document before it; holders only when `now` is the write's time. */
export function decodeLeave(
  before: LineDocument,
  token: string,
  now: Date,
  writeTime: boolean,
): LeaveResult {
  const left = placeOf(before, token, now) !== undefined;
  return { left, holders: writeTime ? holdersAfter(before, [token], now) : [] };
}

/** The holders once the entries `tokens` have left. */
function holdersAfter(before: LineDocument, tokens: readonly string[], now: Date) {
  const leaving = new Set(tokens);
  const after = { ...before, line: before.line?.filter((entry) => !leaving.has(entry.t)) };
  return holdersOf(after, now).map((entry) => ({ ...holdingEntry(entry), h: entry.h }));
}

export type RenewResult = { renewed: false } | ({ renewed: true } & LinePlace);

/** Renews our live entry, holding or waiting (never an ended one): see {@link RENEW_PIPELINE}. */
export async function renewInLine(
  collection: LineCollection,
  key: string,
  token: string,
  ttlMs: number,
  idleRetentionMs: number,
  exactly = false,
): Promise<RenewResult> {
  const pipeline = exactly ? EXPIRE_PIPELINE : RENEW_PIPELINE;
  const after = (await collection.findOneAndUpdate({ _id: key, 'line.t': token }, pipeline, {
    returnDocument: 'after',
    projection: LINE_REPLY,
    let: { t: literal(token), d: ttlMs, g: ttlMs + idleRetentionMs },
  })) as LineReply | null;
  const place =
    after && placeOf(after, token, await timeOf(collection, key, after, { token, ttlMs }));
  return place ? { renewed: true, ...place } : { renewed: false };
}

/** Our entry's place by a read (polling without change streams); undefined if gone or ended. */
export async function readPlace(
  collection: LineCollection,
  key: string,
  token: string,
): Promise<LinePlace | undefined> {
  const doc = await collection.findOne<LineReply>({ _id: key }, { projection: LINE_REPLY });
  return doc ? placeOf(doc, token, doc.now) : undefined;
}

/**
 * In `session`'s transaction: true if the entry that held is live (a holder holds until it leaves
 * or ends), proven by a write, so any line change before the commit conflicts and the transaction
 * reruns. By token and fence: a late retry of the join may have added the token again, behind
 * others. A fresh `tx` id keeps the write from being a no-op (which conflicts with nothing).
 */
export async function confirmInLine(
  collection: LineCollection,
  key: string,
  entry: HoldingEntry,
  session: ClientSession,
): Promise<boolean> {
  const ours = {
    $filter: {
      input: '$line',
      cond: {
        $and: [
          { $gt: ['$$this.e', '$$NOW'] },
          { $eq: ['$$this.t', { $literal: entry.t }] },
          { $eq: ['$$this.f', Long.fromBigInt(entry.fence / FENCES_PER_ENTRY)] },
        ],
      },
    },
  };
  const result = await collection.updateOne(
    { _id: key, $expr: { $gt: [{ $size: ours }, 0] } },
    { $set: { tx: new ObjectId() } },
    { session },
  );
  return result.matchedCount === 1;
}
