import type { Document } from 'mongodb';
import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error';
import { LockNotAcquiredError } from '../../errors/lock-not-acquired.error';
import type { LockEvent, LockState } from '../../interfaces/lock-state.interface';
import { formatMs } from '../../util/durations';
import { decodeJoin, decodeLeave } from '../line/line-commands';
import { boundedCommand } from '../bounded-command';
import type { ServerMonitor } from '../server-monitor';
import { JoinsInFlight } from '../line/joins-in-flight';
import type {
  AttemptTarget,
  HeldDocument,
  JoinRequest,
  JoinResult,
  LeaveResult,
  RenewResult,
} from '../line/line-commands';
import type { LineDocument, LineEntry, LinePlace } from '../line/line-document';
import { holdingEntry, liveEntries, placeOf } from '../line/line-document';
import type { LineChange, LineWatch } from '../line/line-events';
import { leadPattern } from '../line/line-events';
import { decodeLineState } from '../line/line-state';
import type { LineStorage } from '../line/line-store';
import type { DocumentCollection } from './document-writes';
import { byKey, documentNotFound, isDuplicateIdError, keyOfDocumentId } from './document-key';
import { changeFilter, watchChanges, type DocumentChange } from './document-line-events';
import { isBsonNumber, isLockShaped, type DocumentLineFields } from './document-line';

/** A document as a line command's reply holds it: the lock field's line and the server time. */
interface LineRead extends LineDocument {
  doc: Document;
  line: LineEntry[];
  now: Date;
}

/**
 * Engine v2's document locks on one collection (see `document-line.ts`): line commands bounded
 * by the operation timeout, and change streams. A join returns the document too, or throws
 * `DocumentNotFoundError` at once (none meets `where`) unless `createIfMissing` makes it.
 */
export class DocumentLineStore implements LineStorage {
  private readonly joins: JoinsInFlight;

  constructor(
    readonly collection: DocumentCollection,
    readonly fields: DocumentLineFields,
    readonly operationTimeoutMs: number,
    /** Names why MongoDB does not answer a command cut by its bound. */
    private readonly serverMonitor?: ServerMonitor,
  ) {
    this.joins = new JoinsInFlight(serverMonitor);
  }

  joinsSettled(key: string, token: string): Promise<void> | undefined {
    return this.joins.settled(key, token);
  }

  monitorFailure(): Error | undefined {
    return this.serverMonitor?.lastFailure;
  }

  join(request: Omit<JoinRequest, 'idleRetentionMs'>): Promise<JoinResult> {
    return this.joins.join(
      request.key,
      request.token,
      this.operationTimeoutMs,
      async (): Promise<JoinResult> => {
        const { read, created } = await this.joinOrCreate(request);
        const lockField: unknown = read.doc[this.fields.field];
        if (!isLockShaped(lockField))
          throw notALockField(request.key, this.fields.field, lockField);
        const result = decodeJoin(read, request);
        if (result.joined) {
          const next = entryBehind(read, request.token);
          return { ...result, document: { doc: this.fields.strip(read.doc), created, next } };
        }
        const owner: unknown = (lockField as Document | null | undefined)?.owner;
        if (liveEntries(read.line, read.now).length === 0 && owner) {
          throw lockedInV1Form(request.key, lockField as Document);
        }
        return result;
      },
    );
  }

  leave(key: string, token: string): Promise<LeaveResult> {
    return this.send('release', async () => {
      const reply = await this.collection.findOneAndUpdate(
        { ...byKey(key), [this.fields.path('line') + '.t']: token },
        [this.fields.leaveStage(token)],
        { returnDocument: 'before', projection: this.lineProjection },
      );
      if (!reply) return { left: false, holders: [] };
      const before = await this.decode(key, reply);
      // A retried write's reply has no time of its own: the change stream tells the holders.
      return decodeLeave(before, token, before.now, isProjected(reply));
    });
  }

  renew(key: string, token: string, ttlMs: number, exactly = false): Promise<RenewResult> {
    return this.send('renew', async () => {
      const reply = await this.collection.findOneAndUpdate(
        { ...byKey(key), [this.fields.path('line') + '.t']: token },
        [this.fields.renewStage(token, ttlMs, exactly)],
        { returnDocument: 'after', projection: this.lineProjection },
      );
      if (!reply) return { renewed: false };
      const read = await this.decode(key, reply, { token, ttlMs });
      const place = placeOf(read, token, read.now);
      return place ? { renewed: true, ...place } : { renewed: false };
    });
  }

  async place(key: string, token: string): Promise<LinePlace | undefined> {
    const read = await this.readLine('poll', key);
    return read && placeOf(read, token, read.now);
  }

  /**
   * The document (without the lock field) if `token`'s entry holds it; `null`: no document
   * meets `where`; `undefined`: our entry does not hold it.
   */
  readHeld(key: string, token: string, where?: AttemptTarget['where']) {
    return this.send('find', async (): Promise<HeldDocument | null | undefined> => {
      const reply = await this.collection.findOne(
        { ...where, ...byKey(key) },
        { projection: { _id: 0, doc: '$$ROOT', now: '$$NOW' } },
      );
      if (!reply) return null;
      const read = await this.decode(key, reply);
      if (!placeOf(read, token, read.now)?.holds) return undefined;
      return { doc: this.fields.strip(read.doc), created: false, next: entryBehind(read, token) };
    });
  }

  exists(key: string, where: AttemptTarget['where']): Promise<boolean> {
    return this.send('find', async () => {
      const found = await this.collection.findOne(
        { ...where, ...byKey(key) },
        { projection: { _id: 1 } },
      );
      return found !== null;
    });
  }

  /** The line's state; a live lease of the 0.1 form holds the document too, as joins find. */
  async inspect(key: string): Promise<LockState | null> {
    const v1 = Object.fromEntries(V1_FIELDS.map((name) => [name, `$${this.fields.field}.${name}`]));
    const projection = { ...this.lineProjection, v1 };
    const reply = await this.send('inspect', () =>
      this.collection.findOne(byKey(key), { projection }),
    );
    if (!reply) return null;
    const read = await this.decode(key, reply);
    const state = decodeLineState(read, read.now);
    return state.held ? state : (heldInV1Form(state, reply.v1 as Document, read.now) ?? state);
  }

  /**
   * Changes that may make an entry of `holderId`'s process hold: a leave or commit naming it (or
   * `*`: every process) as leader. Replacements, deletions and lock fields or lines removed by
   * other code make the key's waiters look.
   */
  watch(
    holderId: string,
    onChange: (change: LineChange) => void,
    onFailure?: (error: unknown) => void,
    onOpen?: () => void,
  ): LineWatch {
    const { fields } = this;
    const filter = changeFilter(fields, leadPattern(holderId));
    const onEvent = (event: DocumentChange) => {
      const key = keyOfDocumentId(event.documentKey._id);
      if (event.operationType !== 'update' || !event.fullDocument) {
        return onChange({ key, holders: [], lookAgain: true });
      }
      const lock = event.fullDocument[fields.field] as { line?: LineEntry[] } | undefined;
      // A commit by update document leaves dead entries behind: none of them leads.
      const at = event.wallTime instanceof Date ? event.wallTime.getTime() : -Infinity;
      const live = (lock?.line ?? []).filter((entry) => entry.e.getTime() > at);
      // No entry left: other code may have removed the line.
      if (live.length === 0) return onChange({ key, holders: [], lookAgain: true });
      // `updateLookup` read the document after the change: the holder gets it, saving a read.
      const doc = fields.strip(event.fullDocument);
      const next = live[1] ? { t: live[1].t, h: live[1].h } : null;
      const news: HeldDocument = { doc, created: false, fromEvent: true, next };
      onChange({ key, holders: [holdingEntry(live[0])], news });
    };
    return watchChanges(this, filter, { fullDocument: 'updateLookup' }, onEvent, onFailure, onOpen);
  }

  /** Every change that may free a document's lock, as a release (or deletion) event. */
  watchEvents(
    onEvent: (event: LockEvent) => void,
    onFailure?: (error: unknown) => void,
    onOpen?: () => void,
  ): LineWatch {
    const asEvent = (event: DocumentChange) =>
      onEvent({
        type: event.operationType === 'delete' ? 'deleted' : 'released',
        key: keyOfDocumentId(event.documentKey._id),
        holderId: null,
        fence: null,
        at: event.wallTime instanceof Date ? event.wallTime : new Date(),
      });
    return watchChanges(this, changeFilter(this.fields), {}, asEvent, onFailure, onOpen);
  }

  /** The document's line and the server time; `undefined` if there is no such document. */
  private readLine(command: string, key: string): Promise<LineRead | undefined> {
    return this.send(command, async () => {
      const reply = await this.collection.findOne(byKey(key), { projection: this.lineProjection });
      return reply ? this.decode(key, reply) : undefined;
    });
  }

  private get lineProjection(): Document {
    return {
      _id: 0,
      line: `$${this.fields.path('line')}`,
      f: `$${this.fields.path('f')}`,
      now: '$$NOW',
    };
  }

  /**
   * First a join that never creates (the document usually exists); with `createIfMissing`, then
   * an upsert, and a third join if a racing creator won (the upsert collides on `_id`).
   */
  private async joinOrCreate(
    request: Omit<JoinRequest, 'idleRetentionMs'>,
  ): Promise<{ read: LineRead; created: boolean }> {
    const found = await this.joinOnce(request, false);
    if (found) return found;
    if (request.target?.createIfMissing) {
      try {
        const created = await this.joinOnce(request, true);
        if (created) return created;
      } catch (error) {
        if (!isDuplicateIdError(error)) throw error;
      }
      const raced = await this.joinOnce(request, false);
      if (raced) return raced;
    }
    throw documentNotFound(request.key, request.target?.where);
  }

  private async joinOnce(
    request: Omit<JoinRequest, 'idleRetentionMs'>,
    upsert: boolean,
  ): Promise<{ read: LineRead; created: boolean } | undefined> {
    const { field } = this.fields;
    const stages: Document[] = [];
    if (upsert) {
      // Only the upsert's own document has no lock field (a racing creator's has one).
      const fresh = { $eq: [{ $type: `$${field}` }, 'missing'] };
      const created = {
        $mergeObjects: [
          { $literal: request.target?.createIfMissing },
          '$$ROOT',
          this.fields.createdMark,
        ],
      };
      stages.push({ $replaceWith: { $cond: [fresh, created, '$$ROOT'] } });
    }
    stages.push(this.fields.joinStage(request));
    // The upsert matches only a document with a lock field (a racing locker's), else inserts: an
    // existing one without is a duplicate key (see `joinOrCreate`), so `fresh` means inserted.
    const filter = { ...request.target?.where, ...byKey(request.key) };
    if (upsert) filter[field] = { $exists: true };
    const result = await this.collection.findOneAndUpdate(filter, stages, {
      upsert,
      returnDocument: 'after',
      projection: { _id: 0, doc: '$$ROOT', now: '$$NOW' },
      includeResultMetadata: true,
    });
    if (!result.value) return undefined;
    const read = await this.decode(request.key, result.value, request);
    // Our entry's mark: an earlier upsert of this join created the document, its reply lost.
    const marked = read.line.some((entry) => entry.t === request.token && entry.c === true);
    return { read, created: result.lastErrorObject?.upserted !== undefined || marked };
  }

  /**
   * A reply's line and the server time to read it by: the command's `$$NOW`; for a write the
   * driver retried after it landed (answered unprojected: SERVER-31242), the time our lease was
   * set from, else a fresh read's (later is the safe side: fewer live entries).
   */
  private async decode(
    key: string,
    reply: Document,
    ours?: { token: string; ttlMs: number },
  ): Promise<LineRead> {
    const projected = isProjected(reply);
    const doc = (projected ? reply.doc : reply) as Document | undefined;
    const lock = (projected && !doc ? reply : doc?.[this.fields.field]) as Document | undefined;
    // Only what a lock writes: the application's own values there read as no lock.
    const line = (Array.isArray(lock?.line) ? lock.line : []).filter(isEntry) as LineEntry[];
    const f = (isBsonNumber(lock?.f) ? lock?.f : undefined) as LineDocument['f'];
    const read = { _id: key, doc: doc ?? {}, line, f };
    if (projected) return { ...read, now: reply.now as Date };
    const entry = ours && line.find((candidate) => candidate.t === ours.token);
    if (entry && ours) return { ...read, now: new Date(entry.e.getTime() - ours.ttlMs) };
    const time = await this.collection.findOne(byKey(key), {
      projection: { _id: 0, now: '$$NOW' },
    });
    return { ...read, now: (time?.now as Date | undefined) ?? new Date(8.64e15) };
  }

  /** `run`'s commands, bounded by the operation timeout, their errors the library's. */
  send<T>(command: string, run: () => Promise<T>): Promise<T> {
    return boundedCommand(command, this.operationTimeoutMs, run, this.serverMonitor).result;
  }
}

function isEntry(entry: unknown): boolean {
  const { t, e } = (entry ?? {}) as { t?: unknown; e?: unknown };
  return typeof t === 'string' && e instanceof Date;
}

/** The live entry behind `token`'s in `read` (`null`: none), as a commit names it. */
function entryBehind(read: LineRead, token: string): { t: string; h: string } | null {
  const live = liveEntries(read.line, read.now);
  const behind = live[live.findIndex((entry) => entry.t === token) + 1] as LineEntry | undefined;
  return behind ? { t: behind.t, h: behind.h } : null;
}

function notALockField(key: string, field: string, value: unknown): InvalidLockOptionsError {
  const kind = Array.isArray(value)
    ? 'an array'
    : typeof value === 'object'
      ? 'an object'
      : `a ${typeof value}`;
  return new InvalidLockOptionsError(
    `The document with _id ${key} has its own value in the lock field ${JSON.stringify(field)} ` +
      `(${kind}, not a lock): nothing was written. Choose another lockField for this collection`,
    { option: 'lockField' },
  );
}

/** The fields of the 0.1 form of a lock field that say who holds it, and until when. */
const V1_FIELDS = ['owner', 'holder', 'fence', 'acquiredAt', 'expiresAt'];

/** `free` as held by a live lease of the 0.1 form in `lock`, if there is one. */
function heldInV1Form(free: LockState, lock: Document, now: Date): LockState | undefined {
  const { owner, holder, fence, acquiredAt, expiresAt } = lock;
  if (typeof owner !== 'string' || !(expiresAt instanceof Date) || expiresAt <= now) return;
  const holderId = typeof holder === 'string' ? holder : null;
  const remainingMs = expiresAt.getTime() - now.getTime();
  const v1Fence = isBsonNumber(fence) ? BigInt(Math.trunc(Number(fence))) : free.fence;
  return {
    ...free,
    held: true,
    holderId,
    fence: v1Fence,
    remainingMs,
    acquiredAt: acquiredAt instanceof Date ? acquiredAt : null,
    expiresAt,
    mode: 'exclusive',
    holders: [{ holderId, fence: v1Fence, weight: 1, remainingMs }],
  };
}

function lockedInV1Form(key: string, lock: Document): LockNotAcquiredError {
  const holderId = typeof lock.holder === 'string' ? lock.holder : undefined;
  const endsAt = lock.expiresAt instanceof Date ? lock.expiresAt.getTime() : undefined;
  const retryAfterMs = endsAt === undefined ? undefined : Math.max(0, endsAt - Date.now());
  return new LockNotAcquiredError(
    `its lock field is in the 0.1 form, held by a 0.1 process${holderId ? ` (${holderId})` : ''}` +
      `${retryAfterMs === undefined ? '' : ` for about ${formatMs(retryAfterMs)}`}; it is taken ` +
      'once that lease has ended, without waiting for it: stop every 0.1 process (see docs/upgrading.md)',
    { keys: [key], holderId, retryAfterMs },
  );
}

/**
 * Whether a reply is our projection (with the command's `$$NOW`): every projection drops `_id`;
 * a stored image (a retried write's reply) has `_id`, and maybe a user field named `now`.
 */
function isProjected(reply: Document): boolean {
  return reply.now instanceof Date && !('_id' in reply);
}
