import type { Document } from 'bson';

/** Returned by a handler that closed the connection instead of answering. */
export const NO_REPLY: Document = Object.freeze({ __noReply: true });

export function isNoReply(reply: Document): boolean {
  return reply === NO_REPLY;
}
