import type { LockEvent, LockHolderState, LockState } from '../interfaces/lock-state.interface';
import { leaderNameOf } from '../leadership/leader-key';

/** One holder as the board's JSON shows it: fences as decimal strings (JSON has no bigint). */
export interface BoardHolderJson {
  holderId: string | null;
  fence: string;
  weight: number;
  remainingMs: number;
  scope?: string;
}

/** One key as `GET /{path}/api/locks` shows it. Never an owner token. */
export interface BoardLockJson {
  key: string;
  /** The leadership name when the key is a leadership's (`leader of <name>`), else `null`. */
  leaderOf: string | null;
  held: boolean;
  mode: LockState['mode'];
  permits?: number;
  holderId: string | null;
  fence: string;
  remainingMs: number;
  acquiredAt: string | null;
  expiresAt: string | null;
  holders: BoardHolderJson[];
  waiting: number;
}

/** A page of keys; `next` is the `after` of the following page, `null` on the last. */
export interface BoardLockPageJson {
  locks: BoardLockJson[];
  next: string | null;
}

/** A `LockEvent` as the board's event stream sends it. */
export interface BoardEventJson {
  type: LockEvent['type'];
  key: string;
  leaderOf: string | null;
  holderId: string | null;
  fence: string | null;
  at: string;
}

/** What a forced release answers: who held the key. */
export interface BoardReleaseJson {
  key: string;
  released: BoardHolderJson[];
}

export function holderJson(holder: LockHolderState): BoardHolderJson {
  return {
    holderId: holder.holderId,
    fence: holder.fence.toString(),
    weight: holder.weight,
    remainingMs: holder.remainingMs,
    ...(holder.scope === undefined ? {} : { scope: holder.scope }),
  };
}

export function lockJson(state: LockState): BoardLockJson {
  return {
    key: state.key,
    leaderOf: leaderNameOf(state.key) ?? null,
    held: state.held,
    mode: state.mode,
    ...(state.permits === undefined ? {} : { permits: state.permits }),
    holderId: state.holderId,
    fence: state.fence.toString(),
    remainingMs: state.remainingMs,
    acquiredAt: state.acquiredAt?.toISOString() ?? null,
    expiresAt: state.expiresAt?.toISOString() ?? null,
    holders: state.holders.map(holderJson),
    waiting: state.waiting,
  };
}

export function eventJson(event: LockEvent): BoardEventJson {
  return {
    type: event.type,
    key: event.key,
    leaderOf: leaderNameOf(event.key) ?? null,
    holderId: event.holderId,
    fence: event.fence === null ? null : event.fence.toString(),
    at: event.at.toISOString(),
  };
}
