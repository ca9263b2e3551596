import type { Collection, Document } from 'mongodb';
import { firstFence, holdersOf } from '../../../lib/store/line/line-document';
import type { LineDocument } from '../../../lib/store/line/line-document';

/** One holder of a key as the server saw it at `now` (the lock collection's own clock). */
export interface LiveLease {
  key: string;
  holder: string;
  /** The entry's first fence, as sections record it (a decimal string). */
  fence: string;
  remainingMs: number;
}

/**
 * The holders of every key in the lock collection's lines (`<collectionName>_line`) by the
 * server clock of the read: the leading live entries, as the line's rule makes them holders.
 */
export async function readLiveLeases(
  lines: Collection<Document>,
  options: { maxTimeMS?: number } = {},
): Promise<{ keys: string[]; leases: LiveLease[] }> {
  const docs = await lines
    .aggregate<LineDocument & { now: Date }>(
      [{ $project: { line: 1, permits: 1, now: '$$NOW' } }],
      options,
    )
    .toArray();
  const leases: LiveLease[] = [];
  for (const doc of docs) {
    for (const entry of holdersOf(doc, doc.now)) {
      leases.push({
        key: String(doc._id),
        holder: entry.h,
        fence: String(firstFence(entry.f)),
        remainingMs: entry.e.getTime() - doc.now.getTime(),
      });
    }
  }
  return { keys: docs.map((doc) => String(doc._id)), leases };
}
