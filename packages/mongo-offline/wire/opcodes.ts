/** Wire protocol opcodes and OP_MSG flag bits the offline server understands. */
export const OP_REPLY = 1;
export const OP_QUERY = 2004;
export const OP_COMPRESSED = 2012;
export const OP_MSG = 2013;

export const MSG_CHECKSUM_PRESENT = 1;
export const MSG_MORE_TO_COME = 2;
/** An optional bit: the client takes a stream of replies (exhaust) to this request. */
export const MSG_EXHAUST_ALLOWED = 1 << 16;
/** Bits 0-15 are "required": a receiver must reject a message with an unknown one set. */
export const MSG_KNOWN_REQUIRED_BITS = MSG_CHECKSUM_PRESENT | MSG_MORE_TO_COME;

export const HEADER_SIZE = 16;
export const MAX_MESSAGE_SIZE_BYTES = 48_000_000;
export const MAX_BSON_OBJECT_SIZE = 16 * 1024 * 1024;
