// Engine v2's commands (lib/store/line): join, leave and renew on a line of entries per key,
// against a MongoDB over the wire. The holders are the longest compatible prefix of live
// entries; these tests pin that rule, the owner checks, fences, retries and command sizes.
import { randomBytes } from 'node:crypto';
import { BSON, Long } from 'mongodb';
import { InvalidLockOptionsError } from '../../lib/errors/invalid-lock-options.error';
import type { CommandStartedEvent, MongoClient } from 'mongodb';
import type { LineDocument, LineKind } from '../../lib/store/line/line-document';
import { joinLine, leaveLine, renewInLine } from '../../lib/store/line/line-commands';
import type { JoinRequest, LineCollection } from '../../lib/store/line/line-commands';
import { LockTestKit } from '../lock-service/lock-test-kit';
import { interceptedCollection } from '../support/intercepted-collection';

const kit = LockTestKit.forSuite();
const EXCLUSIVE: LineKind = { mode: 'exclusive' };
const SHARED: LineKind = { mode: 'shared' };
const permits = (n: number, weight: number): LineKind => ({ mode: 'permits', permits: n, weight });

let client: MongoClient;
let locks: LineCollection;
let commands: CommandStartedEvent[];

beforeEach(async () => {
  client = await kit.client({ monitorCommands: true });
  commands = [];
  client.on('commandStarted', (event) => commands.push(event));
  locks = client
    .db(kit.mongo.dbName)
    .collection<LineDocument>(kit.collectionName, { writeConcern: { w: 'majority' } });
});

const token = () => randomBytes(12).toString('base64url');

function join(
  key: string,
  tok: string,
  kind: LineKind = EXCLUSIVE,
  extra: Partial<JoinRequest> = {},
) {
  return joinLine(locks, {
    key,
    token: tok,
    holderId: `svc-${tok.slice(0, 4)}`,
    ttlMs: 30_000,
    kind,
    onlyIfHolds: false,
    idleRetentionMs: 60_000,
    ...extra,
  });
}

const tryJoin = (
  key: string,
  tok: string,
  kind: LineKind = EXCLUSIVE,
  extra: Partial<JoinRequest> = {},
) => join(key, tok, kind, { onlyIfHolds: true, ...extra });

function fenceOf(result: Awaited<ReturnType<typeof join>>): bigint {
  if (!result.joined) throw new Error(`not joined: ${result.reason}`);
  return result.fence;
}

describe('exclusive entries (a mutex)', () => {
  it('holds when first in line; a later entry waits, and holds once the first leaves', async () => {
    const [a, b] = [token(), token()];
    const first = await join('k', a);
    const second = await join('k', b);
    expect(first).toMatchObject({ joined: true, holds: true, ahead: 0 });
    expect(second).toMatchObject({ joined: true, holds: false, ahead: 1 });
    expect(second.joined && second.aheadEndsInMs).toBeGreaterThan(29_000);

    const left = await leaveLine(locks, 'k', a);
    expect(left).toEqual({
      left: true,
      holders: [{ t: b, h: `svc-${b.slice(0, 4)}`, fence: fenceOf(second) }],
    });
    expect(await renewInLine(locks, 'k', b, 30_000, 60_000)).toMatchObject({
      renewed: true,
      holds: true,
    });
  });

  it('hands out strictly increasing fences, even after the idle document is gone', async () => {
    const fences: bigint[] = [];
    for (let i = 0; i < 5; i++) {
      const tok = token();
      fences.push(fenceOf(await join('f', tok)));
      await leaveLine(locks, 'f', tok);
    }
    await locks.deleteOne({ _id: 'f' });
    fences.push(fenceOf(await join('f', token())));
    for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]);
  });

  it('a retried join finds its own entry: one entry, the same fence, nothing written', async () => {
    const tok = token();
    const first = await join('r', tok);
    const before = await locks.findOne({ _id: 'r' });
    const retry = await join('r', tok);
    expect(fenceOf(retry)).toBe(fenceOf(first));
    expect(await locks.findOne({ _id: 'r' })).toEqual(before);
  });

  it('tryAcquire on a held key writes nothing and says who holds and for how long', async () => {
    const holder = token();
    await join('t', holder);
    const before = await locks.findOne({ _id: 't' });
    const refused = await tryJoin('t', token());
    expect(refused).toMatchObject({
      joined: false,
      reason: 'held',
      holderId: `svc-${holder.slice(0, 4)}`,
    });
    expect(!refused.joined && refused.retryAfterMs).toBeGreaterThan(29_000);
    expect(await locks.findOne({ _id: 't' })).toEqual(before);
  });

  it('release and renew are owner-checked: another token changes nothing', async () => {
    const holder = token();
    await join('o', holder);
    const before = await locks.findOne({ _id: 'o' });
    expect(await leaveLine(locks, 'o', token())).toEqual({ left: false, holders: [] });
    expect(await renewInLine(locks, 'o', token(), 30_000, 60_000)).toEqual({ renewed: false });
    expect(await locks.findOne({ _id: 'o' })).toEqual(before);
  });

  it('a second leave reports nothing left (a retried release is idempotent)', async () => {
    const tok = token();
    await join('i', tok);
    expect((await leaveLine(locks, 'i', tok)).left).toBe(true);
    expect(await leaveLine(locks, 'i', tok)).toEqual({ left: false, holders: [] });
  });

  it('a lease that ran out frees the line without a write, and is never renewed again', async () => {
    const [dead, next] = [token(), token()];
    await join('e', dead, EXCLUSIVE, { ttlMs: 200 });
    expect(await join('e', next)).toMatchObject({ joined: true, holds: false });
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await renewInLine(locks, 'e', dead, 30_000, 60_000)).toEqual({ renewed: false });
    expect(await renewInLine(locks, 'e', next, 30_000, 60_000)).toMatchObject({
      renewed: true,
      holds: true,
    });
    const doc = await locks.findOne({ _id: 'e' });
    expect(doc?.line?.map((entry) => entry.t)).toEqual([next]);
  });

  it('keeps a small document: no past owners, five fields after hand-offs', async () => {
    const toks = [token(), token(), token()];
    for (const tok of toks) await join('d', tok);
    for (const tok of toks) await leaveLine(locks, 'd', tok);
    await join('d', token());
    const doc = await locks.findOne({ _id: 'd' });
    expect(Object.keys(doc!).sort()).toEqual(['_id', 'f', 'gcAt', 'lead', 'line']);
    expect(Object.keys(doc!.line![0]).sort()).toEqual(['e', 'f', 'h', 't']);
  });

  it('a join keeps the document past its lease and the retention; a leave leaves that as it is', async () => {
    const tok = token();
    await join('g', tok);
    const joined = await locks.findOne({ _id: 'g' });
    expect(joined?.gcAt?.getTime()).toBeGreaterThanOrEqual(joined!.line![0].e.getTime() + 60_000);
    await leaveLine(locks, 'g', tok);
    const idle = await locks.findOne({ _id: 'g' });
    expect(idle?.line).toEqual([]);
    // The emptied line's document (and its fence) stays at least the retention after the leave.
    expect(idle?.gcAt).toEqual(joined?.gcAt);
    expect(idle!.gcAt!.getTime()).toBeGreaterThan(Date.now() + 60_000 - 1_000);
  });

  it('stores hostile strings as they are (values travel as literals)', async () => {
    const scope = '$$NOW';
    await join('h', '$line', EXCLUSIVE, { holderId: '$concat', scope });
    const doc = await locks.findOne({ _id: 'h' });
    expect(doc?.line?.[0]).toMatchObject({ t: '$line', h: '$concat', sc: '$$NOW' });
  });
});

describe('what the review found', () => {
  it('decodes the reply of a write the driver retried (its stored image, with no `now`)', async () => {
    // mongod answers a retried findAndModify with the stored image, without `fields`.
    const retried = interceptedCollection(locks, async (target, args) => {
      const reply = (await target.findOneAndUpdate(...args)) as Record<string, unknown> | null;
      if (reply) delete reply.now;
      return reply;
    });
    const [a, b] = [token(), token()];
    const request = { holderId: 'h', ttlMs: 30_000, kind: EXCLUSIVE, idleRetentionMs: 60_000 };
    const first = await joinLine(retried, { key: 'rt', token: a, onlyIfHolds: false, ...request });
    expect(first).toMatchObject({ joined: true, holds: true });
    expect(first.joined && first.remainingMs).toBe(30_000);
    expect(
      await joinLine(retried, { key: 'rt', token: b, onlyIfHolds: false, ...request }),
    ).toMatchObject({
      joined: true,
      holds: false,
    });
    expect(await renewInLine(retried, 'rt', a, 30_000, 60_000)).toMatchObject({
      renewed: true,
      holds: true,
    });
    // No holders named: read later than the write, the time would count entries still live
    // at the write as dead and name a holder that is not one (the change stream tells them).
    expect(await leaveLine(retried, 'rt', a)).toEqual({ left: true, holders: [] });
  });

  it('keeps an idle document until after its last fence in ms, however far fences ran ahead', async () => {
    // A burst of joins left the fence ahead of the clock.
    const ahead = Date.now() + 600_000;
    await locks.insertOne({ _id: 'burst', f: Long.fromNumber(ahead), line: [] });
    const tok = token();
    await join('burst', tok);
    await leaveLine(locks, 'burst', tok);
    const idle = await locks.findOne({ _id: 'burst' });
    // The TTL index removes it only after gcAt: the next fence, from the clock, is larger.
    expect(idle?.gcAt?.getTime()).toBeGreaterThanOrEqual(ahead);
  });

  it('a holder that never leaves still lets the TTL index remove the document after its lease', async () => {
    await join('crashed', token(), EXCLUSIVE, { ttlMs: 200, idleRetentionMs: 1_000 });
    const doc = await locks.findOne({ _id: 'crashed' });
    const end = doc!.line![0].e.getTime();
    expect(doc?.gcAt?.getTime()).toBeGreaterThanOrEqual(end + 1_000);
  });

  it('refuses values no caller should send: no half-written line', async () => {
    await expect(join('bad', token(), permits(2, 3))).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
    await expect(join('bad', token(), permits(0, 1))).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
    await expect(join('bad', token(), permits(2, -1))).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
    await expect(join('bad', token(), EXCLUSIVE, { ttlMs: 0 })).rejects.toBeInstanceOf(
      InvalidLockOptionsError,
    );
    expect(await locks.findOne({ _id: 'bad' })).toBeNull();
  });
});

describe('shared and exclusive entries on one key', () => {
  it('shared entries hold together; an exclusive waits, and later shared ones queue behind it', async () => {
    const [s1, s2, x, s3] = [token(), token(), token(), token()];
    expect(await join('rw', s1, SHARED)).toMatchObject({ holds: true });
    expect(await join('rw', s2, SHARED)).toMatchObject({ holds: true });
    expect(await join('rw', x)).toMatchObject({ holds: false, ahead: 2 });
    expect(await join('rw', s3, SHARED)).toMatchObject({ holds: false, ahead: 3 });
    expect(await tryJoin('rw', token(), SHARED)).toMatchObject({ joined: false, reason: 'held' });

    await leaveLine(locks, 'rw', s1);
    const afterShared = await leaveLine(locks, 'rw', s2);
    expect(afterShared.holders.map((entry) => entry.t)).toEqual([x]);
    const afterExclusive = await leaveLine(locks, 'rw', x);
    expect(afterExclusive.holders.map((entry) => entry.t)).toEqual([s3]);
  });

  it('tryAcquire of a shared lock joins shared holders but not an exclusive one', async () => {
    await join('rw2', token(), SHARED);
    expect(await tryJoin('rw2', token(), SHARED)).toMatchObject({ joined: true, holds: true });
    expect(await tryJoin('rw2', token())).toMatchObject({ joined: false, reason: 'held' });
  });
});

describe('semaphores', () => {
  it('holders are the leading entries whose permits fit, in line order', async () => {
    const [two, one, twoMore, oneMore] = [token(), token(), token(), token()];
    expect(await join('s', two, permits(3, 2))).toMatchObject({ holds: true });
    expect(await join('s', one, permits(3, 1))).toMatchObject({ holds: true });
    expect(await join('s', twoMore, permits(3, 2))).toMatchObject({ holds: false });
    // A narrow request does not overtake the wide one waiting ahead of it.
    expect(await join('s', oneMore, permits(3, 1))).toMatchObject({ holds: false });
    expect(await tryJoin('s', token(), permits(3, 1))).toMatchObject({ reason: 'held' });

    const left = await leaveLine(locks, 's', two);
    expect(left.holders.map((entry) => entry.t)).toEqual([one, twoMore]);
  });

  it('refuses a key in use in another form, and converts an idle one', async () => {
    const lock = token();
    await join('kind', lock);
    expect(await join('kind', token(), permits(3, 1))).toMatchObject({
      joined: false,
      reason: 'kind',
    });
    const sem = token();
    await leaveLine(locks, 'kind', lock);
    expect(await join('kind', sem, permits(3, 1))).toMatchObject({ joined: true, holds: true });
    expect(await join('kind', token(), permits(4, 1))).toMatchObject({
      joined: false,
      reason: 'kind',
    });
    expect(await join('kind', token())).toMatchObject({ joined: false, reason: 'kind' });
    await leaveLine(locks, 'kind', sem);
    expect(await join('kind', token())).toMatchObject({ joined: true, holds: true });
    expect((await locks.findOne({ _id: 'kind' }))?.permits).toBeUndefined();
  });
});

describe('command sizes (what every call sends)', () => {
  async function largestCommand(kind: LineKind): Promise<number> {
    const [a, b] = [token(), token()];
    // As long as a LockService's: host name, process id and 8 hex digits.
    const holderId = 'ip-10-0-12-34.internal:48211:9f3c2a1b';
    commands = [];
    await join('size', a, kind, { holderId });
    await join('size', b, kind, { holderId });
    await renewInLine(locks, 'size', a, 30_000, 60_000);
    await leaveLine(locks, 'size', a);
    await tryJoin('size', token(), kind, { holderId });
    await leaveLine(locks, 'size', b);
    const sizes = commands
      .filter((event) => event.commandName === 'findAndModify')
      .map((event) => BSON.calculateObjectSize(event.command));
    expect(sizes).toHaveLength(6);
    return Math.max(...sizes);
  }

  it('a mutex sends at most 1 KB per command', async () => {
    expect(await largestCommand(EXCLUSIVE)).toBeLessThanOrEqual(1_024);
  });

  it('shared locks and semaphores send at most 2 KB per command', async () => {
    expect(await largestCommand(SHARED)).toBeLessThanOrEqual(2_048);
    expect(await largestCommand(permits(3, 1))).toBeLessThanOrEqual(2_048);
  });
});
