import type { ClientSession, Timestamp } from 'mongodb';
import type { LockState } from '../interfaces/lock-state.interface';
import { REMAINING_LEASE_MS, toBigInt, toRemainingMs } from './bson-values';
import type { BsonInteger } from './bson-values';
import type { LockCollection, SessionSource } from './lock-document';

interface InspectReply {
  _id: string;
  live: boolean;
  holder: string | null;
  fence: BsonInteger;
  acquiredAt: Date | null;
  expiresAt: Date | null;
  remainingMs: BsonInteger;
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

async function readState(
  collection: LockCollection,
  key: string,
  session: ClientSession | undefined,
): Promise<LockState | null> {
  const reply = (await collection.findOne(
    { _id: key },
    {
      projection: {
        holder: 1,
        fence: 1,
        acquiredAt: 1,
        expiresAt: 1,
        remainingMs: REMAINING_LEASE_MS,
        live: {
          $and: [{ $ne: [{ $ifNull: ['$owner', null] }, null] }, { $gt: ['$expiresAt', '$$NOW'] }],
        },
      },
      session,
    },
  )) as InspectReply | null;
  if (reply === null) return null;
  const held = reply.live === true;
  return {
    key,
    held,
    holderId: reply.holder ?? null,
    fence: toBigInt(reply.fence),
    remainingMs: held ? toRemainingMs(reply.remainingMs) : 0,
    acquiredAt: reply.acquiredAt ?? null,
    expiresAt: reply.expiresAt ?? null,
  };
}
