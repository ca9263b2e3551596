import {
  MongoNetworkError,
  MongoOperationTimeoutError,
  MongoServerError,
  MongoWriteConcernError,
} from 'mongodb';
import { LockStoreUnavailableError } from '../errors';
import {
  isDefiniteFailure,
  isStoreUnavailableError,
  isTooLargeError,
  toStoreError,
} from './mongo-error-codes';

/** A write concern error (majority not confirmed in time) whose reply carries `code`. */
function lateMajorityError(code: number): MongoWriteConcernError {
  return new MongoWriteConcernError({
    message: 'waiting for replication timed out',
    code,
    writeConcernError: { code: 64, errmsg: 'waiting for replication timed out' },
  } as unknown as ConstructorParameters<typeof MongoWriteConcernError>[0]);
}

/** A Node socket error as the driver may pass it on, unwrapped (see SOCKET_ERROR_CODES). */
function socketError(code: string): Error {
  return Object.assign(new Error(`write ${code}`), { code, errno: -104, syscall: 'write' });
}

describe('store error classification', () => {
  it.each(['ECONNRESET', 'EPIPE', 'ECONNREFUSED', 'ETIMEDOUT', 'ESERVFAIL', 'EAI_AGAIN'])(
    'counts an unwrapped socket error (%s) as MongoDB being unavailable',
    (code) => {
      const error = socketError(code);
      expect(isStoreUnavailableError(error)).toBe(true);
      const thrown = toStoreError(error, 'acquire');
      expect(thrown).toBeInstanceOf(LockStoreUnavailableError);
      expect(thrown.cause).toBe(error);
    },
  );

  it('counts an overloaded server and a client timeoutMS that ran out as unavailable', () => {
    for (const label of ['RetryableError', 'SystemOverloadedError']) {
      const overloaded = new MongoServerError({ message: 'overloaded', code: 462 });
      overloaded.addErrorLabel(label);
      expect(isStoreUnavailableError(overloaded)).toBe(true);
    }
    const timedOut = new MongoOperationTimeoutError('Timed out during socket read (100ms)');
    expect(isStoreUnavailableError(timedOut)).toBe(true);
    expect(toStoreError(timedOut, 'acquire')).toBeInstanceOf(LockStoreUnavailableError);
  });

  it('keeps the driver network error unavailable and other errors final', () => {
    expect(isStoreUnavailableError(new MongoNetworkError('reset'))).toBe(true);
    const refused = new MongoServerError({ message: 'not authorized', code: 13 });
    expect(isStoreUnavailableError(refused)).toBe(false);
    expect(toStoreError(refused, 'acquire')).not.toBeInstanceOf(LockStoreUnavailableError);
    expect(isStoreUnavailableError(Object.assign(new Error('odd'), { code: 'ENOENT' }))).toBe(
      false,
    );
  });

  it('counts only a server refusal that is not retryable as a definite failure', () => {
    for (const code of [121, 13, 10334, 11000]) {
      const refused = new MongoServerError({ message: 'refused', code });
      expect(isDefiniteFailure(refused)).toBe(true);
      expect(isDefiniteFailure(toStoreError(refused, 'acquire'))).toBe(true);
    }
    const steppedDown = new MongoServerError({ message: 'stepped down', code: 189 });
    const outOfTime = new MongoServerError({ message: 'operation exceeded time limit', code: 50 });
    const interrupted = new MongoServerError({ message: 'operation was interrupted', code: 11601 });
    const retryRefused = new MongoServerError({ message: 'incomplete history', code: 217 });
    const lateMajority = lateMajorityError(64);
    for (const unknown of [
      steppedDown,
      outOfTime,
      interrupted,
      retryRefused,
      lateMajority,
      new MongoNetworkError('reset'),
    ]) {
      expect(isDefiniteFailure(unknown)).toBe(false);
      expect(isDefiniteFailure(toStoreError(unknown, 'acquire'))).toBe(false);
    }
    expect(isDefiniteFailure(new LockStoreUnavailableError('no answer in time'))).toBe(false);
    // A cut names what the server monitor saw as cause: never a reply to the command itself.
    const named = new MongoServerError({ message: 'refused', code: 11000 });
    const cut = new LockStoreUnavailableError('no answer in time', { cause: named });
    expect(isDefiniteFailure(cut)).toBe(false);
  });

  it('tells a write refused as too large (17419 on 7.0, 10334 BSONObjectTooLarge later)', () => {
    for (const code of [17419, 10334]) {
      expect(isTooLargeError(new MongoServerError({ message: 'too large', code }))).toBe(true);
    }
    for (const other of [
      new MongoServerError({ message: 'duplicate key', code: 11000 }),
      lateMajorityError(10334),
      new RangeError('offset out of range'),
    ]) {
      expect(isTooLargeError(other)).toBe(false);
    }
  });
});
