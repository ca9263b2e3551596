import type { LineKind } from './line/line-document';

/**
 * How an acquisition holds a key: `exclusive`, `shared` (coexists with shared holders only), or
 * a semaphore (`permits`: the holders' weights never exceed them).
 */
export interface LockModeRequest {
  mode: 'exclusive' | 'shared';
  /** A semaphore with this many permits; `undefined` for a lock. */
  permits: number | undefined;
  /** Permits taken (1 for a shared holder, unused when exclusive). */
  weight: number;
}

export const EXCLUSIVE: LockModeRequest = { mode: 'exclusive', permits: undefined, weight: 1 };

/** Most permits of a semaphore: every holder takes at least one, and a line is capped. */
export const MAX_HOLDERS_PER_KEY = 1_000;

/** A shared lock or a semaphore: the kinds whose holders coexist. */
export function isEntryMode(request: LockModeRequest): boolean {
  return request.mode === 'shared' || request.permits !== undefined;
}

/** What a request asks of a key's line. */
export function lineKind(mode: LockModeRequest): LineKind {
  return mode.permits === undefined
    ? { mode: mode.mode }
    : { mode: 'permits', permits: mode.permits, weight: mode.weight };
}
