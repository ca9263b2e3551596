import { type Socket, connect } from 'node:net';
import { BSON } from 'bson';
import { useOfflineMongo } from './with-offline-mongo';

function openSocket(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.on('error', reject);
  });
}

/** Resolves once the server has closed the socket (or after `ms`, with false). */
function closedByServer(socket: Socket, ms = 3000): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
    socket.on('error', () => undefined);
    socket.resume();
  });
}

function header(length: number, opCode: number): Buffer {
  const buffer = Buffer.alloc(16);
  buffer.writeInt32LE(length, 0);
  buffer.writeInt32LE(1, 4);
  buffer.writeInt32LE(0, 8);
  buffer.writeInt32LE(opCode, 12);
  return buffer;
}

function opMsg(body: Buffer, sectionKind = 0, flags = 0): Buffer {
  const flagBytes = Buffer.alloc(4);
  flagBytes.writeUInt32LE(flags, 0);
  const payload = Buffer.concat([flagBytes, Buffer.from([sectionKind]), body]);
  return Buffer.concat([header(16 + payload.length, 2013), payload]);
}

describe('offline mongo: hostile input', () => {
  const harness = useOfflineMongo();
  const port = () => harness().mongo.port;

  afterEach(async () => {
    // Whatever a bad peer sent, the server still serves a well-behaved driver.
    expect(await harness().client.db('admin').command({ ping: 1 })).toMatchObject({ ok: 1 });
  });

  const closingCases: Array<[string, () => Buffer]> = [
    ['random garbage', () => Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n')],
    ['a length prefix beyond maxMessageSizeBytes', () => header(2_000_000_000, 2013)],
    ['a negative length prefix', () => header(-5, 2013)],
    ['a length prefix shorter than a header', () => header(8, 2013)],
    ['an unknown opcode', () => Buffer.concat([header(20, 9999), Buffer.alloc(4)])],
    [
      'OP_COMPRESSED that was never negotiated',
      () => Buffer.concat([header(25, 2012), Buffer.alloc(9)]),
    ],
    [
      'an unknown OP_MSG section kind',
      () => opMsg(Buffer.from(BSON.serialize({ ping: 1, $db: 'admin' })), 7),
    ],
    [
      'an unknown required OP_MSG flag bit',
      () => opMsg(Buffer.from(BSON.serialize({ ping: 1, $db: 'admin' })), 0, 1 << 4),
    ],
    [
      'a BSON document whose length overruns the message',
      () => {
        const bson = Buffer.from(BSON.serialize({ ping: 1, $db: 'admin' }));
        bson.writeInt32LE(10_000, 0);
        return opMsg(bson);
      },
    ],
    [
      'corrupt BSON inside a well-framed message',
      () => {
        const bson = Buffer.from(BSON.serialize({ ping: 1, $db: 'admin' }));
        bson[4] = 0x77; // not a BSON element type
        return opMsg(bson);
      },
    ],
  ];

  it.each(closingCases)('closes the connection on %s', async (_name, message) => {
    const socket = await openSocket(port());
    socket.write(message());
    expect(await closedByServer(socket)).toBe(true);
  });

  it('survives a truncated message followed by a disconnect', async () => {
    const socket = await openSocket(port());
    const full = opMsg(Buffer.from(BSON.serialize({ ping: 1, $db: 'admin' })));
    socket.end(full.subarray(0, full.length - 5));
    await new Promise((resolve) => socket.on('close', resolve).resume());
  });

  it('answers a message split into single bytes', async () => {
    const socket = await openSocket(port());
    const full = opMsg(Buffer.from(BSON.serialize({ ping: 1, $db: 'admin' })));
    const reply = new Promise<Buffer>((resolve) => socket.once('data', resolve));
    for (const byte of full) socket.write(Buffer.from([byte]));
    const response = await reply;
    expect(response.readInt32LE(12)).toBe(2013);
    expect(BSON.deserialize(response.subarray(21))).toMatchObject({ ok: 1 });
    socket.destroy();
  });

  it('accepts a document-sequence section and a checksum, and skips the reply for moreToCome', async () => {
    const socket = await openSocket(port());
    const body = Buffer.from(BSON.serialize({ insert: 'sequenced', $db: 'raw' }));
    const documents = [{ _id: 1 }, { _id: 2 }].map((document) =>
      Buffer.from(BSON.serialize(document)),
    );
    const identifier = Buffer.from('documents\0');
    const sequenceSize = Buffer.alloc(4);
    sequenceSize.writeInt32LE(4 + identifier.length + documents[0].length + documents[1].length, 0);
    const flags = Buffer.alloc(4);
    flags.writeUInt32LE(1, 0); // checksumPresent
    const payload = Buffer.concat([
      flags,
      Buffer.from([0]),
      body,
      Buffer.from([1]),
      sequenceSize,
      identifier,
      ...documents,
      Buffer.alloc(4),
    ]);
    const reply = new Promise<Buffer>((resolve) => socket.once('data', resolve));
    socket.write(Buffer.concat([header(16 + payload.length, 2013), payload]));
    expect(BSON.deserialize((await reply).subarray(21))).toMatchObject({ n: 2, ok: 1 });

    const noReply = Buffer.from(
      BSON.serialize({ insert: 'sequenced', documents: [{ _id: 3 }], $db: 'raw' }),
    );
    socket.write(opMsg(noReply, 0, 2)); // moreToCome
    const ping = new Promise<Buffer>((resolve) => socket.once('data', resolve));
    socket.write(opMsg(Buffer.from(BSON.serialize({ count: 'sequenced', $db: 'raw' }))));
    // Had the insert been answered, that reply ({n: 1}) would arrive first.
    expect(BSON.deserialize((await ping).subarray(21))).toMatchObject({ n: 3 });
    socket.destroy();
  });

  it('answers a non-handshake OP_QUERY with error 352 instead of running it', async () => {
    const socket = await openSocket(port());
    const query = Buffer.from(BSON.serialize({ drop: 'x' }));
    const body = Buffer.concat([
      Buffer.alloc(4),
      Buffer.from('admin.$cmd\0'),
      Buffer.alloc(8),
      query,
    ]);
    const reply = new Promise<Buffer>((resolve) => socket.once('data', resolve));
    socket.write(Buffer.concat([header(16 + body.length, 2004), body]));
    const response = await reply;
    expect(response.readInt32LE(12)).toBe(1); // OP_REPLY
    expect(BSON.deserialize(response.subarray(36))).toMatchObject({ ok: 0, code: 352 });
    socket.destroy();
  });
});
