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

  it('reads a release with the fence of the change, and the holder while the document is that release', () => {
    const change = (full: Record<string, unknown>) =>
      toLockEvent({
        ...base,
        operationType: 'update',
        documentKey: { _id: 'k' },
        updateDescription: { updatedFields: { owner: null, releasedFence: Long.fromNumber(9) } },
        fullDocument: { _id: 'k', ...full },
      } as never);
    expect(change({ owner: null, releasedHolder: 'h2', releasedFence: 9 })).toEqual({
      type: 'released',
      key: 'k',
      holderId: 'h2',
      fence: 9n,
      at: wallTime,
    });
    // Looked up after the next holder took the key and released it again: not that holder.
    expect(
      change({ owner: 'next', holder: 'h3', releasedHolder: 'h3', releasedFence: 10 }),
    ).toEqual({
      type: 'released',
      key: 'k',
      holderId: null,
      fence: 9n,
      at: wallTime,
    });
  });

  it("never reports the next holder's id for an acquisition looked up late", () => {
    const acquisition = (full: Record<string, unknown>) =>
      toLockEvent({
        ...base,
        operationType: 'update',
        documentKey: { _id: 'k' },
        updateDescription: { updatedFields: { owner: 'token', fence: Long.fromNumber(4) } },
        fullDocument: { _id: 'k', ...full },
      } as never);
    expect(acquisition({ owner: 'token', holder: 'h1', fence: 4 })?.holderId).toBe('h1');
    expect(acquisition({ owner: 'later', holder: 'h9', fence: 5 })).toMatchObject({
      type: 'acquired',
      holderId: null,
      fence: 4n,
    });
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
