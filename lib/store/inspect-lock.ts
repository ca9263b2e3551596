import type { ClientSession, Timestamp } from 'mongodb';
import type { LockHolderState, LockState } from '../interfaces/lock-state.interface';
import { REMAINING_LEASE_MS, toBigInt, toRemainingMs } from './bson-values';
import type { BsonInteger } from './bson-values';
import type { LockCollection, SessionSource } from './lock-document';
import { EXCLUSIVE_LIVE, LIVE_HOLDERS, LIVE_RESERVATIONS } from './lock-modes';

/** A lock document as {@link LOCK_STATE_PROJECTION} reads it: never the owner token. */
export interface InspectReply {
  _id: string;
  live: boolean;
  holder: string | null;
  scope?: string | null;
  fence: BsonInteger;
  acquiredAt: Date | null;
  expiresAt: Date | null;
  remainingMs: BsonInteger;
  permits?: BsonInteger | null;
  entries: {
    holder: string | null;
    fence: BsonInteger;
    weight: BsonInteger;
    acquiredAt: Date;
    expiresAt: Date;
    remainingMs: BsonInteger;
    scope?: string | null;
  }[];
  waiting: BsonInteger;
}

/**
 * A key held by one exclusive holder (or free), as every store without holder entries reports
 * it. A free key (released, or its lease run out by the server clock) names no holder and no
 * lease: the document keeps the last holder's fields, which must not read as a live lease.
 */
export function exclusiveLockState(
  state: Omit<LockState, 'mode' | 'holders' | 'waiting' | 'permits'>,
  /** The live lease's owner scope, when the store records one. */
  scope?: string | null,
): LockState {
  if (!state.held) {
    return {
      ...state,
      holderId: null,
      acquiredAt: null,
      expiresAt: null,
      remainingMs: 0,
      mode: null,
      holders: [],
      waiting: 0,
    };
  }
  const holders = [
    {
      holderId: state.holderId,
      fence: state.fence,
      weight: 1,
      remainingMs: state.remainingMs,
      ...scopeOf(scope),
    },
  ];
  return { ...state, mode: 'exclusive', holders, waiting: 0 };
}

export interface LockProbe {
  state: LockState | null;
  /** Monotonic time just before the read was sent. */
  sentAt: number;
  /** Server time of the read, when a session source was given. */
  operationTime: Timestamp | undefined;
}

/**
 * Reads a key's state, with liveness decided by the server clock. The projection leaves
 * out the owner token: whoever reads the state must not be able to release or renew.
 *
 * @example
 * const state = await inspectLock(collection, 'orders:42');
 * if (state?.held) console.log(`${state.holderId} holds it for ${state.remainingMs} ms`);
 */
export async function inspectLock(
  collection: LockCollection,
  key: string,
): Promise<LockState | null> {
  return (await probeLock(collection, undefined, key)).state;
}

/** {@link inspectLock} plus the timing a waiter needs to count down and to start a change stream. */
export async function probeLock(
  collection: LockCollection,
  sessions: SessionSource | undefined,
  key: string,
): Promise<LockProbe> {
  const session = sessions?.startSession({ causalConsistency: true });
  try {
    const sentAt = performance.now();
    const state = await readState(collection, key, session);
    return { state, sentAt, operationTime: session?.operationTime };
  } finally {
    await session?.endSession();
  }
}

/**
 * What a read of lock documents projects: the key's state by the server clock, live holder
 * entries and waiting count. Leaves out the owner tokens.
 */
export const LOCK_STATE_PROJECTION = {
  holder: 1,
  fence: 1,
  acquiredAt: 1,
  expiresAt: 1,
  permits: 1,
  scope: 1,
  remainingMs: REMAINING_LEASE_MS,
  live: EXCLUSIVE_LIVE,
  entries: {
    $map: {
      input: LIVE_HOLDERS,
      in: {
        holder: '$$this.v.holder',
        fence: '$$this.v.fence',
        weight: '$$this.v.weight',
        acquiredAt: '$$this.v.acquiredAt',
        expiresAt: '$$this.v.expiresAt',
        remainingMs: { $subtract: ['$$this.v.expiresAt', '$$NOW'] },
        scope: '$$this.v.scope',
      },
    },
  },
  waiting: { $size: LIVE_RESERVATIONS },
};

async function readState(
  collection: LockCollection,
  key: string,
  session: ClientSession | undefined,
): Promise<LockState | null> {
  const reply = (await collection.findOne(
    { _id: key },
    { projection: LOCK_STATE_PROJECTION, session },
  )) as InspectReply | null;
  return reply === null ? null : decodeLockState(reply);
}

/** `scope` as a holder's field: absent when the lease has none. */
function scopeOf(scope: string | null | undefined): { scope?: string } {
  return typeof scope === 'string' ? { scope } : {};
}

/** A key's state from a document read with {@link LOCK_STATE_PROJECTION}. */
export function decodeLockState(reply: InspectReply): LockState {
  const key = reply._id;
  const base = {
    key,
    holderId: reply.holder ?? null,
    fence: toBigInt(reply.fence),
    acquiredAt: reply.acquiredAt ?? null,
    expiresAt: reply.expiresAt ?? null,
  };
  const waiting = Number(reply.waiting ?? 0);
  if (reply.live === true || reply.entries.length === 0) {
    const held = reply.live === true;
    const remainingMs = held ? toRemainingMs(reply.remainingMs) : 0;
    return { ...exclusiveLockState({ ...base, held, remainingMs }, reply.scope), waiting };
  }
  const entries = [...reply.entries].sort((a, b) => Number(toBigInt(a.fence) - toBigInt(b.fence)));
  const latest = entries[entries.length - 1];
  const lastEnd = entries.reduce((end, entry) => (entry.expiresAt > end.expiresAt ? entry : end));
  const permits = reply.permits == null ? undefined : Number(reply.permits);
  return {
    key,
    held: true,
    holderId: latest.holder ?? null,
    fence: toBigInt(reply.fence),
    remainingMs: Math.max(...entries.map((entry) => toRemainingMs(entry.remainingMs))),
    acquiredAt: latest.acquiredAt,
    expiresAt: lastEnd.expiresAt,
    mode: permits === undefined ? 'shared' : 'semaphore',
    ...(permits === undefined ? {} : { permits }),
    holders: entries.map(decodeHolderEntry),
    waiting,
  };
}

/** One live holder entry, as {@link LOCK_STATE_PROJECTION} (or a forced release) reads it. */
export function decodeHolderEntry(entry: {
  holder: string | null;
  fence: BsonInteger;
  weight: BsonInteger;
  remainingMs: BsonInteger;
  scope?: string | null;
}): LockHolderState {
  return {
    holderId: entry.holder ?? null,
    fence: toBigInt(entry.fence),
    weight: Number(entry.weight),
    remainingMs: toRemainingMs(entry.remainingMs),
    ...scopeOf(entry.scope),
  };
}
