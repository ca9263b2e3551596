import { DocumentBusy } from './document-busy';
import type { Document } from 'bson';
import type { Collection } from './collection';
import type { Storage } from './storage';
import { Query } from 'mingo/query';
import { valuesAtPath } from './bson-values';
import { MINGO_OPTIONS } from './mingo-options';

/** The date a TTL index reads from a document: the earliest date of the field (arrays too). */
function earliestDate(document: Document, field: string): Date | undefined {
  let earliest: Date | undefined;
  for (const value of valuesAtPath(document, field)) {
    const candidates = Array.isArray(value) ? value : [value];
    for (const candidate of candidates) {
      if (candidate instanceof Date && (!earliest || candidate < earliest)) earliest = candidate;
    }
  }
  return earliest;
}

function expiredDocuments(collection: Collection, now: number): Document[] {
  const expired: Document[] = [];
  for (const spec of collection.indexes) {
    if (spec.expireAfterSeconds === undefined) continue;
    const field = Object.keys(spec.key)[0];
    const seconds = Number(spec.expireAfterSeconds);
    // A partial TTL index only sees (and so only expires) the documents it indexes.
    const partial = spec.partialFilterExpression
      ? new Query(spec.partialFilterExpression, MINGO_OPTIONS)
      : undefined;
    for (const document of collection.documents.values()) {
      if (partial && !partial.test(document)) continue;
      const date = earliestDate(document, field);
      if (date && date.getTime() + seconds * 1000 <= now && !expired.includes(document))
        expired.push(document);
    }
  }
  return expired;
}

/** One pass of MongoDB's TTL monitor: ordinary deletes, so change streams see them. */
export function removeExpiredDocuments(storage: Storage, now = Date.now()): number {
  let removed = 0;
  for (const collections of [...storage.databases.values()]) {
    for (const collection of [...collections.values()]) {
      for (const document of expiredDocuments(collection, now)) {
        try {
          storage.delete(collection, document);
          removed += 1;
        } catch (error) {
          // Written by an open transaction: left for a later pass, as a mongod's monitor does.
          if (!(error instanceof DocumentBusy)) throw error;
        }
      }
    }
  }
  return removed;
}

/** Runs a pass every `sleepSeconds()`; the period is re-read so setParameter takes effect. */
export class TtlMonitor {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly storage: Storage,
    private readonly sleepSeconds: () => number,
    private readonly enabled: () => boolean,
  ) {}

  start(): void {
    this.schedule();
  }

  /** Restart the wait, e.g. after ttlMonitorSleepSecs changed. */
  reschedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.schedule();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(): void {
    const delay = Math.max(0.01, this.sleepSeconds()) * 1000;
    this.timer = setTimeout(() => {
      try {
        if (this.enabled()) removeExpiredDocuments(this.storage);
      } catch {
        // A failed pass (e.g. a bad document) must not take the server down; the next retries.
      }
      this.schedule();
    }, delay);
    this.timer.unref();
  }
}
