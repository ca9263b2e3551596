import { FramingError, MessageFramer } from '../wire/message-framer';

function message(length: number, fill = 0): Buffer {
  const buffer = Buffer.alloc(length, fill);
  buffer.writeInt32LE(length, 0);
  return buffer;
}

describe('MessageFramer', () => {
  it('reassembles messages split across chunks and splits coalesced ones', () => {
    const framer = new MessageFramer();
    const first = message(20, 1);
    const second = message(24, 2);
    const stream = Buffer.concat([first, second]);
    expect(framer.push(stream.subarray(0, 3))).toEqual([]);
    expect(framer.push(stream.subarray(3, 30))).toEqual([first]);
    expect(framer.push(stream.subarray(30))).toEqual([second]);
  });

  it.each([0, 15, -1, 48_000_001])('rejects the length prefix %i', (length) => {
    const framer = new MessageFramer();
    const head = Buffer.alloc(4);
    head.writeInt32LE(length, 0);
    expect(() => framer.push(head)).toThrow(FramingError);
  });
});
