// Change streams, find and command cursors: creating them (server-side cursor included),
// iterating and closing them.
import type { ChangeStream, Document, FindCursor, RunCommandCursor } from 'mongodb';
import { take, type OperationCall, type OperationFn } from './operation-call';

interface Watchable {
  watch(pipeline: Document[], options: Document): ChangeStream;
}

/** The driver runs `aggregate` lazily; its unified-runner hook creates the cursor without iterating. */
async function openChangeStream(stream: ChangeStream) {
  const cursor = (stream as unknown as { cursor: { cursorInit(): Promise<void> } }).cursor;
  await cursor.cursorInit();
  return stream;
}

function cursorEntity(call: OperationCall) {
  const id = call.operation.object;
  return call.entities.kindOf(id) === 'changeStream'
    ? call.entities.get(id, 'changeStream')
    : call.entities.get(id, 'cursor');
}

function commandCursor(call: OperationCall): RunCommandCursor {
  const [{ command, batchSize, comment, maxTimeMS }, options] = take(
    call.args,
    'command',
    'commandName',
    'batchSize',
    'comment',
    'maxTimeMS',
  );
  const cursor = call.entities
    .get(call.operation.object, 'database')
    .runCursorCommand(command, options);
  // These configure the getMore commands only; the first command is sent as given.
  if (batchSize !== undefined) cursor.setBatchSize(batchSize);
  if (comment !== undefined) cursor.setComment(comment);
  if (maxTimeMS !== undefined) cursor.setMaxTimeMS(maxTimeMS);
  return cursor;
}

export const cursorOperations: Record<string, OperationFn> = {
  async createChangeStream(call) {
    const kind = call.entities.kindOf(call.operation.object);
    const target =
      kind === 'client'
        ? call.entities.get(call.operation.object, 'client').client
        : (call.entities.any(call.operation.object) as Watchable);
    const [{ pipeline }, options] = take(call.args, 'pipeline');
    return openChangeStream(target.watch(pipeline ?? [], options));
  },
  async createFindCursor(call) {
    const [{ filter }, options] = take(call.args, 'filter');
    const cursor = call.entities.get(call.operation.object, 'collection').find(filter, options);
    // hasNext runs `find` and buffers the first batch without consuming a document.
    await cursor.hasNext();
    return cursor;
  },
  async createCommandCursor(call) {
    const cursor = commandCursor(call);
    await cursor.hasNext();
    return cursor;
  },
  async runCursorCommand(call) {
    return commandCursor(call).toArray();
  },
  async iterateUntilDocumentOrError(call) {
    const cursor = cursorEntity(call) as FindCursor | ChangeStream;
    return cursor.next();
  },
  async iterateOnce(call) {
    const cursor = cursorEntity(call) as FindCursor | ChangeStream;
    return cursor.tryNext();
  },
  async close(call) {
    const kind = call.entities.kindOf(call.operation.object);
    if (kind === 'client') {
      await call.entities.get(call.operation.object, 'client').client.close();
      return;
    }
    try {
      await cursorEntity(call).close();
    } catch {
      // The spec: drivers do not report killCursors errors consistently, so none is asserted.
    }
  },
};
