import type { Document } from 'mongodb';
import { LONG_ONE, toBigInt } from '../bson-values';
import type { BsonInteger } from '../bson-values';
import type { DocumentLockFields } from './document-lock-fields';

/*
 * How a release or commit of a document lock tried again after one that MongoDB did not confirm
 * (a lost reply, a write concern error after the write) recognises that one's success without
 * keeping past owners in the document.
 *
 * A first release goes by owner token alone: the lock is ours, or it is lost. Only a release
 * sent after an earlier release or commit of the same lease that may have landed looks further
 * (see `document-release-tries.ts`): the fence check below assumes that every fence between
 * `lostFence` and the current one was issued to one chain of lock fields, which other code that
 * writes the lock field can break, and a first release has nothing to gain from it.
 *
 * The lock field keeps `fence` after release, and one more number, `lostFence`: the newest
 * fence whose lease ended WITHOUT its owner's release or commit (taken over after it ran out,
 * released after it ran out, unlocked or removed by other code), or, for a lock field that
 * started afresh, the fence just before its first. Each lock sets it from the lock field it
 * finds (see `lostFenceAtLock`); releases and commits of live leases leave it as it is.
 *
 * A lock released or committed by its owner has exactly `{ owner: null, holder, fence,
 * lostFence }`: `owner` present and null, no lease (`acquiredAt`, `expiresAt` missing). The
 * ways other code unlocks by hand do not leave that form: `owner` set to null with the lease
 * left, `owner` removed, or `expiresAt` set to null (see `releasedForm`); other code that writes
 * exactly that form releases as we do, and passes for a release (no marker would help against
 * that, nor against a copy, and one would cost every document ~20 bytes). So lease N, whose
 * owner token is no longer in the document, was released by its owner when N > lostFence, and
 * either N < fence (later locks found each lease before them released by its owner) or N =
 * fence and the lock field has that released form. Fences are never reused, so nobody else's
 * release can pass for ours. Otherwise the outcome cannot be told, and the release reports the
 * lock lost.
 *
 * What two fences cannot show: a copy of the lock field written back by other code (a read,
 * then a `replaceOne` of the whole document) after the lock was taken and before the retry.
 * The copy's fences are older than ours, the next lock keeps its `lostFence`, and a retry may
 * take that for our release. A first release, by token, reports such a lock lost.
 */

/**
 * True when the lock field has the form a release or commit by its owner leaves: `owner`
 * present and null, and no lease (`acquiredAt` and `expiresAt` missing). Not by truthiness: an
 * `owner` removed, or an `expiresAt` set to null, is other code's unlock, not a release. The
 * aggregation `$type` tells null from missing (the query operator `$type` has no "missing").
 */
export function releasedForm(fields: DocumentLockFields) {
  const types = ['owner', 'acquiredAt', 'expiresAt'].map((name) => ({ $type: fields.value(name) }));
  return { $eq: [types, ['null', 'missing', 'missing']] };
}

/**
 * `lostFence` for a lock that takes a free document, from the lock field it finds: unchanged
 * after a release by the owner, the found lease's fence otherwise (it ran out, or other code
 * ended it), and the fence before the new one for a lock field that starts afresh (fences
 * never go below the server's clock in ms: earlier ones are below it).
 */
export function lostFenceAtLock(fields: DocumentLockFields) {
  const found = {
    $ifNull: [fields.value('fence'), { $subtract: [{ $toLong: '$$NOW' }, LONG_ONE] }],
  };
  return {
    $ifNull: [{ $cond: [releasedForm(fields), fields.value('lostFence'), null] }, found],
  };
}

/**
 * The lock field after its owner gave it up: no owner and no lease, the fence kept (fences
 * only grow), the last holder kept for diagnostics; a lease that had already run out counts as
 * lost (`lostFence`), so a retry of its release is not taken for a release while live. Whatever
 * else the field held (the ring of released owners of earlier versions) goes.
 */
export function releasedLock(fields: DocumentLockFields, live: unknown): Document {
  return {
    owner: null,
    holder: fields.value('holder'),
    fence: fields.value('fence'),
    lostFence:
      live === true
        ? fields.value('lostFence')
        : { $cond: [live, fields.value('lostFence'), fields.value('fence')] },
  };
}

/**
 * Update operators that give up a live lease (a commit written as an update document): the
 * same form as {@link releasedLock}. The lock was taken by this version, so the field holds
 * nothing else.
 */
export function releaseOperators(fields: DocumentLockFields): Document {
  return {
    $set: { [fields.path('owner')]: null },
    $unset: { [fields.path('acquiredAt')]: '', [fields.path('expiresAt')]: '' },
  };
}

/** A lock field as a release reads it before writing (see `releaseDocumentLock`). */
export interface StoredDocumentLock {
  owner?: string | null;
  fence?: BsonInteger | null;
  lostFence?: BsonInteger | null;
  /** {@link releasedForm}, as the server evaluated it on the lock field. */
  releasedForm?: boolean;
}

/**
 * Whether lease `fence`, whose owner token is no longer in the lock field, was released or
 * committed by its owner, that is by us (see the comment at the top). The same rule as
 * `lostFenceAtLock`, read on the client. For a release tried again after one that may have
 * landed only.
 */
export function releasedByUs(lock: StoredDocumentLock | null | undefined, fence: bigint): boolean {
  if (!lock || lock.fence == null || lock.lostFence == null) return false;
  const current = toBigInt(lock.fence);
  if (fence <= toBigInt(lock.lostFence) || fence > current) return false;
  return fence < current || lock.releasedForm === true;
}
