import { Long, Timestamp } from 'mongodb';
import { toLockEvent } from './lock-event';

const wallTime = new Date('2026-01-01T00:00:00Z');
const base = {
  _id: { _data: 'x' },
  ns: { db: 'd', coll: 'locks' },
  wallTime,
  clusterTime: new Timestamp({ t: 1, i: 1 }),
};

describe('toLockEvent', () => {
  it('reads an update that sets an owner as an acquisition', () => {
    const event = toLockEvent({
      ...base,
      operationType: 'update',
      documentKey: { _id: 'k' },
      updateDescription: {
        updatedFields: { owner: 'token', holder: 'h1', fence: Long.fromNumber(7) },
      },
    } as never);
    expect(event).toEqual({ type: 'acquired', key: 'k', holderId: 'h1', fence: 7n, at: wallTime });
  });

  it('reads an update that clears the owner as a release, with the holder from the full document', () => {
    const event = toLockEvent({
      ...base,
      operationType: 'update',
      documentKey: { _id: 'k' },
      updateDescription: { updatedFields: { owner: null } },
      fullDocument: { _id: 'k', owner: null, holder: 'h2', fence: 9 },
    } as never);
    expect(event).toEqual({ type: 'released', key: 'k', holderId: 'h2', fence: 9n, at: wallTime });
  });

  it('trusts the update over a full document looked up later', () => {
    const event = toLockEvent({
      ...base,
      operationType: 'update',
      documentKey: { _id: 'k' },
      updateDescription: { updatedFields: { owner: null } },
      fullDocument: { _id: 'k', owner: 'someone-new', holder: 'h3', fence: 10 },
    } as never);
    expect(event?.type).toBe('released');
  });

  it('reads an insert as an acquisition and a delete as a deletion', () => {
    expect(
      toLockEvent({
        ...base,
        operationType: 'insert',
        documentKey: { _id: 'k' },
        fullDocument: { _id: 'k', owner: 't', holder: 'h', fence: 1 },
      } as never)?.type,
    ).toBe('acquired');
    expect(
      toLockEvent({ ...base, operationType: 'delete', documentKey: { _id: 'k' } } as never),
    ).toEqual({
      type: 'deleted',
      key: 'k',
      holderId: null,
      fence: null,
      at: wallTime,
    });
  });

  it('ignores updates that do not change ownership and events without a string key', () => {
    expect(
      toLockEvent({
        ...base,
        operationType: 'update',
        documentKey: { _id: 'k' },
        updateDescription: { updatedFields: { expiresAt: new Date() } },
      } as never),
    ).toBeUndefined();
    expect(
      toLockEvent({ ...base, operationType: 'delete', documentKey: { _id: 5 } } as never),
    ).toBeUndefined();
    expect(toLockEvent({ ...base, operationType: 'drop' } as never)).toBeUndefined();
  });
});
