import type { Document } from 'bson';
import type { CommandContext } from '../commands/context';

const WRITE_COMMANDS = new Set([
  'insert',
  'update',
  'delete',
  'findandmodify',
  'committransaction',
  'aborttransaction',
  'create',
  'drop',
  'dropdatabase',
  'createindexes',
  'dropindexes',
  'renamecollection',
  'collmod',
]);

/**
 * A one-member replica set cannot satisfy `w` > 1 or an unknown tag: the write applies and
 * the reply carries the writeConcernError a real member would send.
 */
export function withWriteConcernOutcome(context: CommandContext, reply: Document): Document {
  const w: unknown = (context.command.writeConcern as Document | undefined)?.w;
  if (reply.ok !== 1 || reply.writeConcernError || w === undefined) return reply;
  if (!context.server.options.replicaSet || !WRITE_COMMANDS.has(context.name.toLowerCase()))
    return reply;
  if (typeof w === 'number' && w > 1) {
    return {
      ...reply,
      writeConcernError: {
        code: 100,
        codeName: 'UnsatisfiableWriteConcern',
        errmsg: 'Not enough data-bearing nodes',
      },
    };
  }
  if (typeof w === 'string' && w !== 'majority') {
    const errmsg = `No write concern mode named '${w}' found in replica set configuration`;
    return {
      ...reply,
      writeConcernError: { code: 79, codeName: 'UnknownReplWriteConcern', errmsg },
    };
  }
  return reply;
}
