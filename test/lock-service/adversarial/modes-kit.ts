import type { LockTestKit } from '../lock-test-kit';

/** A lock document as stored, owner tokens included (tests only). */
export type RawLock = Record<string, any>;

/** `key`'s lock document, read over the wire. */
export async function rawLockOf(kit: LockTestKit, key: string): Promise<RawLock | undefined> {
  const docs: RawLock[] = await kit.rawLocks();
  return docs.find((doc) => doc._id === key);
}

/** The document's live, unreleased holder entries by the local clock. */
export function liveEntries(doc: RawLock | undefined, now = Date.now()): RawLock[] {
  return Object.values((doc?.holders ?? {}) as Record<string, RawLock>).filter(
    (entry) => entry.releasedAt == null && new Date(entry.expiresAt).getTime() > now,
  );
}

/** The names of the document's unexpired reservations by the local clock. */
export function liveReservations(doc: RawLock | undefined, now = Date.now()): string[] {
  return Object.entries((doc?.waiting ?? {}) as Record<string, RawLock>)
    .filter(([, reservation]) => new Date(reservation.expiresAt).getTime() > now)
    .map(([name]) => name);
}

/** A findAndModify of `appName` is held on the server this long, then runs (not failed). */
export const slowAttempts = (appName: string, blockTimeMS: number) => ({
  failCommands: ['findAndModify'],
  appName,
  blockConnection: true,
  blockTimeMS,
});
