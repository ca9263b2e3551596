import { Timestamp } from 'bson';
import {
  decodeResumeToken,
  encodeResumeToken,
  highWaterMark,
  isAfter,
} from '../change-streams/resume-token';

const ts = (t: number, i: number) => new Timestamp({ t, i });

describe('resume tokens', () => {
  it('round-trip and sort as strings in cluster-time order', () => {
    const tokens = [
      encodeResumeToken({ ts: ts(100, 1), eventIndex: 0, kind: 'event' }),
      encodeResumeToken({ ts: ts(100, 1), eventIndex: 1, kind: 'invalidate' }),
      highWaterMark(ts(100, 1)),
      encodeResumeToken({ ts: ts(100, 2), eventIndex: 0, kind: 'event' }),
      encodeResumeToken({ ts: ts(101, 0), eventIndex: 0, kind: 'event' }),
    ].map((token) => String(token._data));
    expect([...tokens].sort()).toEqual(tokens);
    const decoded = decodeResumeToken({ _data: tokens[1] });
    expect(decoded).toMatchObject({ eventIndex: 1, kind: 'invalidate' });
    expect(decoded.ts.equals(ts(100, 1))).toBe(true);
  });

  it('places later events after a token and nothing of its time after a high-water mark', () => {
    const event = decodeResumeToken(
      encodeResumeToken({ ts: ts(5, 5), eventIndex: 0, kind: 'event' }),
    );
    expect(isAfter(event, ts(5, 5), 0)).toBe(false);
    expect(isAfter(event, ts(5, 5), 1)).toBe(true);
    expect(isAfter(event, ts(5, 6), 0)).toBe(true);
    const mark = decodeResumeToken(highWaterMark(ts(5, 5)));
    expect(isAfter(mark, ts(5, 5), 1)).toBe(false);
    expect(isAfter(mark, ts(5, 6), 0)).toBe(true);
  });

  it('rejects tokens this server did not make with InvalidResumeToken', () => {
    expect(() => decodeResumeToken({ _data: 'zz' })).toThrow(
      expect.objectContaining({ code: 260 }),
    );
  });
});
