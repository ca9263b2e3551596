import { BSON, type Document } from 'bson';
import {
  HEADER_SIZE,
  MSG_CHECKSUM_PRESENT,
  MSG_EXHAUST_ALLOWED,
  MSG_KNOWN_REQUIRED_BITS,
  MSG_MORE_TO_COME,
  OP_COMPRESSED,
  OP_MSG,
  OP_QUERY,
  OP_REPLY,
} from './opcodes';
import { decodeBson } from './bson-decoder';

export class ProtocolError extends Error {}

/** One decoded request: the command document plus what is needed to answer it. */
export interface DecodedRequest {
  requestId: number;
  opCode: typeof OP_MSG | typeof OP_QUERY;
  /** `<db>` of the command: `$db` for OP_MSG, the namespace prefix for OP_QUERY. */
  db: string;
  command: Document;
  /** The client asked for no reply (OP_MSG moreToCome, i.e. w:0). */
  moreToCome: boolean;
  /** The client takes a stream of replies (OP_MSG exhaustAllowed: a streaming hello). */
  exhaustAllowed: boolean;
}

/** As `BSON.deserialize` with Longs promoted to numbers where they fit (bson-decoder.ts). */
export function deserializeDocument(bytes: Buffer): Document {
  return decodeBson(bytes);
}

function readDocumentAt(buffer: Buffer, offset: number, end: number): [Document, number] {
  if (offset + 5 > end) throw new ProtocolError('truncated BSON document');
  const size = buffer.readInt32LE(offset);
  if (size < 5 || offset + size > end)
    throw new ProtocolError('BSON document length out of bounds');
  return [deserializeDocument(buffer.subarray(offset, offset + size)), offset + size];
}

function readCString(buffer: Buffer, offset: number, end: number): [string, number] {
  const nul = buffer.indexOf(0, offset);
  if (nul < 0 || nul >= end) throw new ProtocolError('unterminated cstring');
  return [buffer.toString('utf8', offset, nul), nul + 1];
}

export function decodeMessage(message: Buffer): DecodedRequest {
  const requestId = message.readInt32LE(4);
  const opCode = message.readInt32LE(12);
  if (opCode === OP_MSG) return decodeOpMsg(message, requestId);
  if (opCode === OP_QUERY) return decodeOpQuery(message, requestId);
  if (opCode === OP_COMPRESSED) throw new ProtocolError('OP_COMPRESSED was never negotiated');
  throw new ProtocolError(`unsupported opcode ${opCode}`);
}

function decodeOpMsg(message: Buffer, requestId: number): DecodedRequest {
  if (message.length < HEADER_SIZE + 5) throw new ProtocolError('OP_MSG too short');
  const flags = message.readUInt32LE(HEADER_SIZE);
  if ((flags & 0xffff & ~MSG_KNOWN_REQUIRED_BITS) !== 0) {
    throw new ProtocolError(`unknown required OP_MSG flag bits ${flags}`);
  }
  // The CRC-32C is tolerated but not verified: loopback TCP does not corrupt bytes.
  const end = flags & MSG_CHECKSUM_PRESENT ? message.length - 4 : message.length;
  let offset = HEADER_SIZE + 4;
  let command: Document | undefined;
  const sequences: Array<[string, Document[]]> = [];
  while (offset < end) {
    const kind = message[offset++];
    if (kind === 0) {
      if (command) throw new ProtocolError('OP_MSG has more than one body section');
      [command, offset] = readDocumentAt(message, offset, end);
    } else if (kind === 1) {
      if (offset + 4 > end) throw new ProtocolError('truncated document sequence');
      const sectionEnd = offset + message.readInt32LE(offset);
      if (sectionEnd > end || sectionEnd < offset + 5) {
        throw new ProtocolError('document sequence length out of bounds');
      }
      const [identifier, afterIdentifier] = readCString(message, offset + 4, sectionEnd);
      let cursor = afterIdentifier;
      const documents: Document[] = [];
      while (cursor < sectionEnd) {
        let document: Document;
        [document, cursor] = readDocumentAt(message, cursor, sectionEnd);
        documents.push(document);
      }
      sequences.push([identifier, documents]);
      offset = sectionEnd;
    } else {
      throw new ProtocolError(`unknown OP_MSG section kind ${kind}`);
    }
  }
  if (!command) throw new ProtocolError('OP_MSG without a body section');
  for (const [identifier, documents] of sequences) command[identifier] = documents;
  const db = typeof command.$db === 'string' ? command.$db : '';
  return {
    requestId,
    opCode: OP_MSG,
    db,
    command,
    moreToCome: (flags & MSG_MORE_TO_COME) !== 0,
    exhaustAllowed: (flags & MSG_EXHAUST_ALLOWED) !== 0,
  };
}

function decodeOpQuery(message: Buffer, requestId: number): DecodedRequest {
  const [namespace, afterNamespace] = readCString(message, HEADER_SIZE + 4, message.length);
  // numberToSkip and numberToReturn (8 bytes) mean nothing to a command.
  const [query] = readDocumentAt(message, afterNamespace + 8, message.length);
  // Legacy drivers wrap the command as {$query: {...}, $readPreference: ...}.
  const command = query.$query && typeof query.$query === 'object' ? query.$query : query;
  const db = namespace.split('.')[0];
  return { requestId, opCode: OP_QUERY, db, command, moreToCome: false, exhaustAllowed: false };
}

function header(length: number, responseTo: number, opCode: number, requestId: number): Buffer {
  const buffer = Buffer.alloc(HEADER_SIZE);
  buffer.writeInt32LE(length, 0);
  buffer.writeInt32LE(requestId, 4);
  buffer.writeInt32LE(responseTo, 8);
  buffer.writeInt32LE(opCode, 12);
  return buffer;
}

export function serializeReply(reply: Document): Buffer {
  return Buffer.from(BSON.serialize(reply, { ignoreUndefined: true }));
}

/** `moreToCome`: another reply follows this one (exhaust). */
export function encodeOpMsgReply(
  body: Buffer,
  responseTo: number,
  requestId: number,
  moreToCome = false,
): Buffer {
  const prefix = Buffer.alloc(5); // flagBits, then section kind 0
  prefix.writeUInt32LE(moreToCome ? MSG_MORE_TO_COME : 0, 0);
  return Buffer.concat([
    header(HEADER_SIZE + 5 + body.length, responseTo, OP_MSG, requestId),
    prefix,
    body,
  ]);
}

export function encodeOpReply(body: Buffer, responseTo: number, requestId: number): Buffer {
  const fields = Buffer.alloc(20); // responseFlags, cursorID (8), startingFrom, numberReturned
  fields.writeInt32LE(1, 16);
  return Buffer.concat([
    header(HEADER_SIZE + 20 + body.length, responseTo, OP_REPLY, requestId),
    fields,
    body,
  ]);
}
