import { HEADER_SIZE, MAX_MESSAGE_SIZE_BYTES } from './opcodes';

export class FramingError extends Error {}

/**
 * Splits a TCP byte stream into whole wire messages. Validates only the length prefix;
 * a length outside [16, maxMessageSizeBytes] means the peer is broken or hostile, and the
 * caller closes the connection instead of buffering up to the claimed size.
 */
export class MessageFramer {
  private chunks: Buffer[] = [];
  private buffered = 0;

  push(chunk: Buffer): Buffer[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const messages: Buffer[] = [];
    for (;;) {
      if (this.buffered < 4) return messages;
      const head = this.peek(4);
      const length = head.readInt32LE(0);
      if (length < HEADER_SIZE || length > MAX_MESSAGE_SIZE_BYTES) {
        throw new FramingError(`invalid message length ${length}`);
      }
      if (this.buffered < length) return messages;
      messages.push(this.take(length));
    }
  }

  private peek(size: number): Buffer {
    if (this.chunks[0].length >= size) return this.chunks[0];
    const joined = Buffer.concat(this.chunks);
    this.chunks = [joined];
    return joined;
  }

  private take(size: number): Buffer {
    const joined = this.peek(size);
    const message = joined.subarray(0, size);
    const rest = joined.subarray(size);
    this.chunks = rest.length > 0 ? [rest] : [];
    this.buffered -= size;
    return message;
  }
}
