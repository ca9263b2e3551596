import type { Document } from 'bson';
import type { FailPointMode } from '../faults/fail-points';
import type { CommandHandler } from './context';
import { CommandError } from './errors';

const SUPPORTED_FAIL_POINTS = new Set([
  'failCommand',
  'onPrimaryTransactionalWrite',
  'failGetMoreAfterCursorCheckout',
]);

const configureFailPoint: CommandHandler = (context) => {
  const name = String(context.command.configureFailPoint);
  if (!SUPPORTED_FAIL_POINTS.has(name)) throw new CommandError(2, `Unknown fail point: ${name}`);
  const mode = context.command.mode as FailPointMode | undefined;
  if (mode === undefined) throw new CommandError(2, 'mode is required');
  const data = (context.command.data as Document) ?? {};
  return { count: context.server.failPoints.configure(name, mode, data), ok: 1 };
};

/** Waits until a fail point has fired `timesEntered` times since the server started. */
const waitForFailPoint: CommandHandler = async (context) => {
  const { command } = context;
  const name = String(command.waitForFailPoint);
  if (!SUPPORTED_FAIL_POINTS.has(name)) throw new CommandError(2, `Unknown fail point: ${name}`);
  const times = Number(command.timesEntered);
  const maxTimeMS = Number(command.maxTimeMS);
  if (!Number.isFinite(times)) throw new CommandError(40414, 'timesEntered is required');
  if (!(maxTimeMS > 0)) throw new CommandError(40414, 'maxTimeMS is required');
  if (!(await context.server.failPoints.waitFor(name, times, maxTimeMS))) {
    throw new CommandError(50, 'operation exceeded time limit');
  }
  return { ok: 1 };
};

/**
 * Simulated step-down: for `secs` seconds the node is a secondary (hello says so, writes
 * fail with NotWritablePrimary); open cursors are killed like on a real step-down.
 */
const replSetStepDown: CommandHandler = (context) => {
  const { server, command } = context;
  if (!server.options.replicaSet) throw new CommandError(76, 'not running with --replSet');
  if (!server.isWritablePrimary) throw new CommandError(10107, "not primary so can't step down");
  const seconds = Number(command.replSetStepDown ?? 60);
  server.stepDown(seconds * 1000);
  server.cursors.killAll(
    new CommandError(
      11602,
      'operation was interrupted because a replica set state change occurred',
    ),
  );
  server.transactions.abortAll();
  return { ok: 1 };
};

const replSetFreeze: CommandHandler = () => ({ ok: 1 });

/** Ends the sessions' transactions and cursors (endSessions, killSessions). */
const endSessions: CommandHandler = (context) => {
  const field = context.name.toLowerCase() === 'endsessions' ? 'endSessions' : 'killSessions';
  const sessions = (context.command[field] as Document[] | undefined) ?? [];
  const { transactions, cursors } = context.server;
  for (const lsid of sessions) {
    transactions.endSession(lsid);
    const id: unknown = lsid.id;
    cursors.killForSessions(
      (owner) =>
        owner !== undefined &&
        owner.id !== undefined &&
        JSON.stringify(owner.id) === JSON.stringify(id),
    );
  }
  return { ok: 1 };
};

const killAllSessions: CommandHandler = (context) => {
  context.server.transactions.abortAll();
  context.server.cursors.killForSessions((owner) => owner !== undefined);
  return { ok: 1 };
};

export const adminCommands: Record<string, CommandHandler> = {
  configurefailpoint: configureFailPoint,
  waitforfailpoint: waitForFailPoint,
  replsetstepdown: replSetStepDown,
  replsetfreeze: replSetFreeze,
  endsessions: endSessions,
  killsessions: endSessions,
  killallsessions: killAllSessions,
  killallsessionsbypattern: killAllSessions,
  committransaction: () => {
    throw new CommandError(50768, 'commitTransaction must be run within a transaction');
  },
  aborttransaction: () => {
    throw new CommandError(50768, 'abortTransaction must be run within a transaction');
  },
};
