import { exclusiveLockState } from '../inspect-lock';
import { Long } from 'mongodb';
import type { ClientSession, Collection, Document } from 'mongodb';
import { DocumentNotFoundError } from '../../errors/document-not-found.error';
import type { LockState } from '../../interfaces/lock-state.interface';
import type {
  AcquireAttemptOutcome,
  AcquireAttemptRequest,
  AttemptTarget,
} from '../acquire-attempt';
import { LONG_ONE, LONG_ZERO, toBigInt, toRemainingMs } from '../bson-values';
import type { BsonInteger } from '../bson-values';
import type { LeaseCommands } from '../lease-commands';
import type { LockProbe } from '../inspect-lock';
import type { LockChangeStream, SessionSource } from '../lock-document';
import type { ReleaseLeaseOutcome } from '../release-lease';
import { openDocumentLockChangeStream } from './document-lock-change-stream';
import { byKey, documentIdOfKey, isDuplicateIdError } from './document-key';
import { DocumentLockFields } from './document-lock-fields';
import { lostFenceAtLock, releasedByUs, releasedForm, releasedLock } from './document-lock-release';
import type { StoredDocumentLock } from './document-lock-release';
import type { HeldDocumentLeases } from './document-release-tries';

/** The application collection whose documents carry a lock field. */
export type DocumentCollection = Pick<
  Collection<Document>,
  'findOneAndUpdate' | 'findOne' | 'watch' | 'collectionName'
>;

interface AttemptReply {
  doc: Document;
  remainingMs: BsonInteger;
}

function acquirePipeline(
  fields: DocumentLockFields,
  { owner, holder, ttlMs, target }: AcquireAttemptRequest,
  upsert: boolean,
): Document[] {
  const free = {
    $and: [
      {
        $or: [
          { $eq: [{ $ifNull: [fields.value('owner'), null] }, null] },
          { $lte: [fields.value('expiresAt'), '$$NOW'] },
        ],
      },
      { $not: [fields.heldOnLine] },
    ],
  };
  // The whole lock field: whatever else it held (the ring of released owners that earlier
  // versions kept) goes. The lease comes last, where a release removes it from.
  const taken = {
    owner: { $literal: owner },
    holder: { $literal: holder },
    // Never below the server's clock in ms: a document deleted and created again still
    // gets a larger fence than any it had before.
    fence: {
      $max: [
        { $add: [{ $ifNull: [fields.value('fence'), LONG_ZERO] }, LONG_ONE] },
        { $toLong: '$$NOW' },
        // Past every fence engine v2 handed out here (its number f stands for f·16 to f·16+15).
        { $multiply: [{ $add: [{ $toLong: { $ifNull: [fields.value('f'), -1] } }, 1] }, 16] },
      ],
    },
    lostFence: lostFenceAtLock(fields),
    acquiredAt: '$$NOW',
    expiresAt: { $add: ['$$NOW', ttlMs] },
  };
  const stages: Document[] = [];
  if (upsert && target?.createIfMissing) {
    // Sent only after an attempt found no document matching the filter: a document here without
    // a lock field is the upsert's own (one a racing creator made has its lock field).
    const fresh = { $eq: [{ $type: fields.whole }, 'missing'] };
    const created = { $mergeObjects: [{ $literal: target.createIfMissing }, '$$ROOT'] };
    stages.push({ $replaceWith: { $cond: [fresh, created, '$$ROOT'] } });
  }
  // When held, the lock field is set to itself: a no-op that writes nothing and wakes nobody.
  stages.push({
    $set: {
      [fields.field]: { $cond: [free, taken, fields.whole] },
    },
  });
  return stages;
}

/** Gives the lock up if `owner` holds it; otherwise sets the lock field to itself (no write). */
function releasePipeline(fields: DocumentLockFields, owner: string): Document[] {
  const ours = { $eq: [fields.value('owner'), owner] };
  const live = { $gt: [fields.value('expiresAt'), '$$NOW'] };
  return [
    { $set: { [fields.field]: { $cond: [ours, releasedLock(fields, live), fields.whole] } } },
  ];
}

/**
 * The lease commands of a lock field in the application's own documents, keyed by
 * `keyOfDocumentId`. Same rules as the lock collection (server clock, owner tokens, fences that
 * only grow, a losing attempt writes nothing), but documents are never created (except by
 * `createIfMissing`) nor removed, the acquiring round trip also returns the document, and no
 * past owner stays in the document: a release goes by owner token, and only a release tried
 * again after one of the same lease that may have landed (as `held` knows it) recognises that
 * one's success, from the fences alone (see `document-lock-release.ts`).
 */
export function documentLeaseCommands(
  collection: DocumentCollection,
  sessions: SessionSource,
  fields: DocumentLockFields,
  held?: HeldDocumentLeases,
): LeaseCommands {
  return {
    attempt: (request) => attemptDocumentLock(collection, sessions, fields, request),
    renew: async ({ key, owner, ttlMs }) => {
      const sentAt = performance.now();
      const reply = await collection.findOneAndUpdate(
        { ...byKey(key), ...fields.heldBy(owner) },
        [{ $set: { [fields.path('expiresAt')]: { $add: ['$$NOW', ttlMs] } } }],
        { returnDocument: 'after', projection: { _id: 0, remainingMs: fields.remainingMs } },
      );
      if (reply === null) return { renewed: false, sentAt };
      return {
        renewed: true,
        sentAt,
        remainingMs: toRemainingMs(reply.remainingMs as BsonInteger),
      };
    },
    release: async (key, owner, options) => {
      const fence = options?.fence;
      const tries = held?.of(key, owner, fence);
      const release = (retryOf: bigint | undefined) =>
        releaseDocumentLock(collection, fields, key, owner, retryOf);
      if (!tries) return { outcome: await release(undefined) };
      return { outcome: await tries.release((retry) => release(retry ? fence : undefined)) };
    },
    inspect: async (key) => (await probeDocumentLock(collection, undefined, fields, key)).state,
    probe: (key) => probeDocumentLock(collection, sessions, fields, key),
    openChangeStream: (options): LockChangeStream =>
      openDocumentLockChangeStream(collection, sessions, fields, options),
    // The application owns its collection's indexes; `_id` is all a document lock needs.
    ensureIndexes: async () => undefined,
  };
}

async function attemptDocumentLock(
  collection: DocumentCollection,
  sessions: SessionSource,
  fields: DocumentLockFields,
  request: AcquireAttemptRequest,
): Promise<AcquireAttemptOutcome> {
  // The document usually exists: one round trip, which never creates anything.
  const found = await attemptOnce(collection, sessions, fields, request, false);
  if (found) return found;
  if (!request.target?.createIfMissing) throw notFound(request.key, request.target);
  // No document matched: any document with this `_id` now is one a racing creator just made,
  // or one that fails `where` (the upsert then collides on `_id`).
  try {
    const created = await attemptOnce(collection, sessions, fields, request, true);
    if (created) return created;
  } catch (error) {
    if (!isDuplicateIdError(error)) throw error;
  }
  const raced = await attemptOnce(collection, sessions, fields, request, false);
  if (raced) return raced;
  throw notFound(request.key, request.target);
}

function notFound(key: string, target: AttemptTarget | undefined): DocumentNotFoundError {
  return new DocumentNotFoundError(
    `No document with _id ${key}${target?.where ? " that meets the lock's `where`" : ''}`,
    { id: documentIdOfKey(key) },
  );
}

async function attemptOnce(
  collection: DocumentCollection,
  sessions: SessionSource,
  fields: DocumentLockFields,
  request: AcquireAttemptRequest,
  upsert: boolean,
): Promise<AcquireAttemptOutcome | null> {
  const session = sessions.startSession({ causalConsistency: true });
  try {
    const sentAt = performance.now();
    const result = await collection.findOneAndUpdate(
      { ...request.target?.where, ...byKey(request.key) },
      acquirePipeline(fields, request, upsert),
      {
        upsert,
        returnDocument: 'after',
        projection: { _id: 0, doc: '$$ROOT', remainingMs: fields.remainingMs },
        includeResultMetadata: true,
        session,
      },
    );
    const reply = result.value as AttemptReply | null;
    if (reply === null) return null;
    const lock = (reply.doc[fields.field] ?? {}) as Document;
    const base = {
      key: request.key,
      sentAt,
      remainingMs: toRemainingMs(reply.remainingMs),
      operationTime: session.operationTime,
    };
    if (lock.owner !== request.owner) {
      return { ...base, won: false, holderId: (lock.holder as string | undefined) ?? null };
    }
    return {
      ...base,
      won: true,
      holderId: request.holder,
      owner: request.owner,
      fence: toBigInt(lock.fence as BsonInteger),
      document: {
        doc: fields.strip(reply.doc),
        created: result.lastErrorObject?.upserted !== undefined,
      },
    };
  } finally {
    await session.endSession();
  }
}

/**
 * Gives the lock up if `owner` holds it. `retryOf`: the fence of our lease, for a release sent
 * after an earlier release or commit of that lease that may have landed; the lock field may
 * then show that it did (see `releasedByUs`). A first release goes by token alone: it finds the
 * lock ours, or reports it lost, whatever other code wrote to the lock field meanwhile.
 */
async function releaseDocumentLock(
  collection: DocumentCollection,
  fields: DocumentLockFields,
  key: string,
  owner: string,
  retryOf: bigint | undefined,
): Promise<ReleaseLeaseOutcome> {
  const since =
    retryOf === undefined ? [] : [{ [fields.path('fence')]: { $gte: Long.fromBigInt(retryOf) } }];
  const before = await collection.findOneAndUpdate(
    { ...byKey(key), $or: [{ [fields.path('owner')]: owner }, ...since] },
    releasePipeline(fields, owner),
    {
      returnDocument: 'before',
      projection: {
        _id: 0,
        lock: fields.whole,
        ...(retryOf === undefined ? {} : { releasedForm: releasedForm(fields) }),
        remainingMs: { $subtract: [fields.value('expiresAt'), '$$NOW'] },
      },
    },
  );
  if (before === null) return 'lost';
  const lock = before.lock as StoredDocumentLock | undefined;
  if (lock?.owner !== owner) {
    // Released by an earlier try while live; otherwise lost, or not to be told from lost.
    const found = { ...lock, releasedForm: before.releasedForm === true };
    return retryOf !== undefined && releasedByUs(found, retryOf) ? 'released' : 'lost';
  }
  return toRemainingMs(before.remainingMs as BsonInteger) > 0 ? 'released' : 'expired';
}

async function probeDocumentLock(
  collection: DocumentCollection,
  sessions: SessionSource | undefined,
  fields: DocumentLockFields,
  key: string,
): Promise<LockProbe> {
  const session: ClientSession | undefined = sessions?.startSession({ causalConsistency: true });
  try {
    const sentAt = performance.now();
    const reply = await collection.findOne(byKey(key), {
      projection: {
        _id: 0,
        lock: fields.whole,
        live: fields.held,
        remainingMs: fields.remainingMs,
      },
      session,
    });
    return {
      state: reply && toLockState(key, reply),
      sentAt,
      operationTime: session?.operationTime,
    };
  } finally {
    await session?.endSession();
  }
}

function toLockState(key: string, reply: Document): LockState {
  const lock = (reply.lock ?? {}) as Document;
  const held = reply.live === true;
  return exclusiveLockState({
    key,
    held,
    holderId: (lock.holder as string | undefined) ?? null,
    fence: toBigInt(lock.fence as BsonInteger | undefined),
    remainingMs: held ? toRemainingMs(reply.remainingMs as BsonInteger) : 0,
    acquiredAt: (lock.acquiredAt as Date | undefined) ?? null,
    expiresAt: (lock.expiresAt as Date | undefined) ?? null,
  });
}
