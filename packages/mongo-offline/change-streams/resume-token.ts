import { type Document, Timestamp } from 'bson';
import { CommandError } from '../commands/errors';

/** What a resume token points at: an event of the oplog entry at `ts`, or a time (high-water mark). */
export interface ResumePoint {
  ts: Timestamp;
  /** Index of the event among those one oplog entry produces (a drop yields drop + invalidate). */
  eventIndex: number;
  kind: 'event' | 'invalidate' | 'highWaterMark';
}

const KIND_CODES = { event: '00', invalidate: '01', highWaterMark: 'FF' } as const;
const HIGH_WATER_MARK_INDEX = 0xffff;

function hex(value: number, width: number): string {
  return value.toString(16).toUpperCase().padStart(width, '0');
}

/**
 * `{_data: '82' + t + i + eventIndex + kind}` in fixed-width upper-case hex, so that tokens
 * compare (as strings) in cluster-time order like MongoDB's keystring tokens do.
 */
export function encodeResumeToken(point: ResumePoint): Document {
  const eventIndex = point.kind === 'highWaterMark' ? HIGH_WATER_MARK_INDEX : point.eventIndex;
  return {
    _data: `82${hex(point.ts.high >>> 0, 8)}${hex(point.ts.low >>> 0, 8)}${hex(eventIndex, 4)}${KIND_CODES[point.kind]}`,
  };
}

export function highWaterMark(ts: Timestamp): Document {
  return encodeResumeToken({ ts, eventIndex: HIGH_WATER_MARK_INDEX, kind: 'highWaterMark' });
}

export function decodeResumeToken(token: unknown): ResumePoint {
  const data = token && typeof token === 'object' ? (token as Document)._data : undefined;
  if (typeof data !== 'string' || !/^82[0-9A-F]{20}(00|01|FF)$/i.test(data)) {
    throw new CommandError(260, 'Invalid resume token: not produced by this server');
  }
  const t = parseInt(data.slice(2, 10), 16);
  const i = parseInt(data.slice(10, 18), 16);
  const eventIndex = parseInt(data.slice(18, 22), 16);
  const code = data.slice(22, 24).toLowerCase();
  const kind = code === '01' ? 'invalidate' : code === 'ff' ? 'highWaterMark' : 'event';
  return { ts: new Timestamp({ t, i }), eventIndex, kind };
}

/** Whether the event at (ts, eventIndex) comes strictly after the resume point. */
export function isAfter(point: ResumePoint, ts: Timestamp, eventIndex: number): boolean {
  const order = ts.compare(point.ts);
  if (order !== 0) return order > 0;
  if (point.kind === 'highWaterMark') return false;
  return eventIndex > point.eventIndex;
}
