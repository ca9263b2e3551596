import type { Document } from 'bson';
import type { OplogEntry } from '../engine/oplog';
import { encodeResumeToken } from './resume-token';

/** Which namespaces a stream watches. */
export type StreamScope =
  | { level: 'collection'; db: string; coll: string }
  | { level: 'database'; db: string }
  | { level: 'cluster' };

const INTERNAL_DATABASES = new Set(['admin', 'config', 'local']);

function inScope(scope: StreamScope, db: string, coll?: string): boolean {
  if (coll?.startsWith('system.')) return false;
  if (scope.level === 'cluster') return !INTERNAL_DATABASES.has(db);
  if (scope.level === 'database') return db === scope.db;
  return db === scope.db && coll === scope.coll;
}

export interface RawChangeEvent {
  event: Document;
  /** An invalidate ends the stream after it is delivered. */
  invalidates: boolean;
}

function baseEvent(
  entry: OplogEntry,
  eventIndex: number,
  operationType: string,
  invalidate = false,
  expanded = false,
): Document {
  const event: Document = {
    _id: encodeResumeToken({ ts: entry.ts, eventIndex, kind: invalidate ? 'invalidate' : 'event' }),
    operationType,
    clusterTime: entry.ts,
    wallTime: entry.wallTime,
  };
  if (expanded && !invalidate && entry.collectionUUID) event.collectionUUID = entry.collectionUUID;
  return event;
}

function withTransaction(event: Document, entry: OplogEntry, inTransaction: boolean): Document {
  if (inTransaction && entry.lsid)
    Object.assign(event, { lsid: entry.lsid, txnNumber: entry.txnNumber });
  return event;
}

/**
 * The events (before user stages) that one oplog entry produces for a stream of `scope`,
 * in order: e.g. a collection drop gives `drop` then `invalidate` to a collection stream.
 */
export function eventsForEntry(
  entry: OplogEntry,
  scope: StreamScope,
  expanded = false,
): RawChangeEvent[] {
  const ns = { db: entry.db, coll: entry.coll };
  switch (entry.op) {
    case 'create':
    case 'createIndexes':
    case 'dropIndexes': {
      // DDL events exist only for streams opened with showExpandedEvents.
      if (!expanded || !inScope(scope, entry.db, entry.coll)) return [];
      const event = {
        ...baseEvent(entry, 0, entry.op, false, expanded),
        ns,
        operationDescription: entry.operationDescription,
      };
      return [{ event, invalidates: false }];
    }
    case 'insert':
    case 'update':
    case 'replace':
    case 'delete': {
      if (!inScope(scope, entry.db, entry.coll)) return [];
      const event = baseEvent(entry, 0, entry.op, false, expanded);
      if (entry.op === 'insert' || entry.op === 'replace') event.fullDocument = entry.fullDocument;
      event.ns = ns;
      event.documentKey = entry.documentKey;
      if (entry.op === 'update') {
        // disambiguatedPaths (6.1+, expanded events only): none of our paths are ambiguous.
        event.updateDescription = expanded
          ? { ...entry.updateDescription, disambiguatedPaths: {} }
          : entry.updateDescription;
      }
      return [
        { event: withTransaction(event, entry, entry.inTransaction === true), invalidates: false },
      ];
    }
    case 'drop': {
      if (!inScope(scope, entry.db, entry.coll)) return [];
      const events: RawChangeEvent[] = [
        { event: { ...baseEvent(entry, 0, 'drop'), ns }, invalidates: false },
      ];
      if (scope.level === 'collection')
        events.push({ event: baseEvent(entry, 1, 'invalidate', true), invalidates: true });
      return events;
    }
    case 'rename': {
      if (!inScope(scope, entry.db, entry.coll)) return [];
      const events: RawChangeEvent[] = [
        {
          event: {
            ...baseEvent(entry, 0, 'rename', false, expanded),
            ns,
            to: entry.to,
            ...(expanded ? { operationDescription: entry.operationDescription } : {}),
          },
          invalidates: false,
        },
      ];
      if (scope.level === 'collection')
        events.push({ event: baseEvent(entry, 1, 'invalidate', true), invalidates: true });
      return events;
    }
    case 'dropDatabase': {
      if (scope.level === 'collection' || !inScope(scope, entry.db)) return [];
      const events: RawChangeEvent[] = [
        {
          event: { ...baseEvent(entry, 0, 'dropDatabase'), ns: { db: entry.db } },
          invalidates: false,
        },
      ];
      if (scope.level === 'database')
        events.push({ event: baseEvent(entry, 1, 'invalidate', true), invalidates: true });
      return events;
    }
    default:
      return [];
  }
}
