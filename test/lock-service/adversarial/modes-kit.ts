import type { LockTestKit } from '../lock-test-kit';

/** A lock document as stored (`<collectionName>_line`), entry tokens included (tests only). */
export type RawLock = Record<string, any>;

/** `key`'s lock document, read over the wire. */
export async function rawLockOf(kit: LockTestKit, key: string): Promise<RawLock | undefined> {
  const docs: RawLock[] = await kit.rawLocks();
  return docs.find((doc) => doc._id === key);
}

/** The entries of the document's line whose lease has not ended by the local clock. */
export function liveEntries(doc: RawLock | undefined, now = Date.now()): RawLock[] {
  return ((doc?.line ?? []) as RawLock[]).filter((entry) => new Date(entry.e).getTime() > now);
}

/** A findAndModify of `appName` is held on the server this long, then runs (not failed). */
export const slowAttempts = (appName: string, blockTimeMS: number) => ({
  failCommands: ['findAndModify'],
  appName,
  blockConnection: true,
  blockTimeMS,
});
