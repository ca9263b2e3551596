import { formatMs } from '../util/durations';
import { LockStoreUnavailableError } from '../errors/lock-store-unavailable.error';
import { toStoreError } from './mongo-error-codes';

/** A command sent to MongoDB, with the caller's view bounded in time. */
export interface BoundedCommand<T> {
  /** Settles within `timeoutMs`: the reply, or the library's error. */
  readonly result: Promise<T>;
  /** The command itself, which goes on after a timeout: the driver cannot recall what it sent. */
  readonly sent: Promise<T>;
}

/**
 * Sends one command and stops waiting for it after `timeoutMs`, failing with
 * {@link LockStoreUnavailableError}. Driver errors become the library's (see `toStoreError`).
 * The outcome of a command that timed out is unknown: callers that may have written must
 * look at `sent` to clean up after it. `timeoutMessage` words the timeout for what is not a
 * lock command (the start); by default it says that the command's outcome is unknown.
 *
 * @example
 * const { result } = boundedCommand('renew', 5_000, () => renewLease(collection, request));
 */
export function boundedCommand<T>(
  command: string,
  timeoutMs: number,
  send: () => Promise<T>,
  timeoutMessage: (timeoutMs: number) => string = (ms) =>
    `MongoDB did not answer ${command} within ${formatMs(ms)}; its outcome is unknown`,
): BoundedCommand<T> {
  const sent = Promise.resolve().then(send);
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new LockStoreUnavailableError(timeoutMessage(timeoutMs))),
      timeoutMs,
    );
  });
  const result = Promise.race([sent, deadline])
    .catch((error: unknown) => {
      throw toStoreError(error, command);
    })
    .finally(() => clearTimeout(timer));
  // Whoever watches `sent` handles its failure; this only keeps it from being unhandled.
  sent.catch(() => undefined);
  return { result, sent };
}
