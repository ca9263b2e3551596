import { formatMs } from '../util/durations';
import { LockStoreUnavailableError } from '../errors/lock-store-unavailable.error';
import { toStoreError } from './mongo-error-codes';
import type { ServerMonitor } from './server-monitor';

/** A command sent to MongoDB, with the caller's view bounded in time. */
export interface BoundedCommand<T> {
  /** Settles within `timeoutMs`: the reply, or the library's error. */
  readonly result: Promise<T>;
  /** The command itself, which goes on after a timeout: the driver cannot recall it. */
  readonly sent: Promise<T>;
}

/**
 * The error of a wait for MongoDB cut by its bound: `message`, then what `source` saw fail last
 * (`why`, if any), which is also its cause.
 */
export function unansweredError(
  message: string,
  why: Error | undefined,
  source = "the server monitor's last check",
): LockStoreUnavailableError {
  return why === undefined
    ? new LockStoreUnavailableError(message)
    : new LockStoreUnavailableError(`${message}; ${source} failed: ${why.message}`, { cause: why });
}

/**
 * Sends one command and stops waiting after `timeoutMs`, failing with
 * {@link LockStoreUnavailableError}, which names the `monitor`'s last failure since its last
 * success (why MongoDB does not answer), if any; driver errors become the library's
 * (`toStoreError`). A timed-out command's outcome is unknown: callers that may have written
 * watch `sent` to clean up. `timeoutError` makes the timeout's error for non-lock commands (the
 * start, which gives its last try's failure as the cause).
 *
 * @example
 * const { result } = boundedCommand('release', 5_000, () => leaveLine(collection, key, token));
 */
export function boundedCommand<T>(
  command: string,
  timeoutMs: number,
  send: () => Promise<T>,
  monitor?: ServerMonitor,
  timeoutError: (timeoutMs: number) => LockStoreUnavailableError = (ms) =>
    unansweredError(
      `MongoDB did not answer ${command} within ${formatMs(ms)}; its outcome is unknown`,
      monitor?.lastFailure,
    ),
): BoundedCommand<T> {
  const sent = Promise.resolve().then(send);
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timeoutError(timeoutMs)), timeoutMs);
  });
  const result = Promise.race([sent, deadline])
    .catch((error: unknown) => {
      throw toStoreError(error, command);
    })
    .finally(() => clearTimeout(timer));
  // Only keeps `sent` from being unhandled; whoever watches it handles its failure.
  sent.catch(() => undefined);
  return { result, sent };
}
