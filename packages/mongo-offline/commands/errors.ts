import type { Document } from 'bson';

/** MongoDB's code -> codeName for the errors the offline server raises. */
export const CODE_NAMES: Record<number, string> = {
  2: 'BadValue',
  9: 'FailedToParse',
  11: 'UserNotFound',
  14: 'TypeMismatch',
  20: 'IllegalOperation',
  22: 'InvalidBSON',
  26: 'NamespaceNotFound',
  27: 'IndexNotFound',
  40: 'ConflictingUpdateOperators',
  43: 'CursorNotFound',
  48: 'NamespaceExists',
  50: 'MaxTimeMSExpired',
  52: 'DollarPrefixedFieldName',
  59: 'CommandNotFound',
  66: 'ImmutableField',
  67: 'CannotCreateIndex',
  72: 'InvalidOptions',
  73: 'InvalidNamespace',
  85: 'IndexOptionsConflict',
  86: 'IndexKeySpecsConflict',
  91: 'ShutdownInProgress',
  112: 'WriteConflict',
  125: 'CommandFailed',
  175: 'QueryPlanKilled',
  189: 'PrimarySteppedDown',
  225: 'TransactionTooOld',
  216: 'ElectionInProgress',
  237: 'CursorKilled',
  251: 'NoSuchTransaction',
  256: 'TransactionCommitted',
  260: 'InvalidResumeToken',
  263: 'OperationNotSupportedInTransaction',
  280: 'ChangeStreamFatalError',
  286: 'ChangeStreamHistoryLost',
  352: 'UnsupportedOpQueryCommand',
  10107: 'NotWritablePrimary',
  11000: 'DuplicateKey',
  11600: 'InterruptedAtShutdown',
  11601: 'Interrupted',
  11602: 'InterruptedDueToReplStateChange',
  13435: 'NotPrimaryNoSecondaryOk',
  40573: 'Location40573',
};

export function codeNameOf(code: number): string {
  return CODE_NAMES[code] ?? `Location${code}`;
}

/** An error that becomes a `{ok: 0, code, codeName, errmsg}` reply. */
export class CommandError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly extra: Document = {},
  ) {
    super(message);
  }

  get codeName(): string {
    return codeNameOf(this.code);
  }

  toReply(): Document {
    return { ok: 0, errmsg: this.message, code: this.code, codeName: this.codeName, ...this.extra };
  }
}

export function badValue(message: string): CommandError {
  return new CommandError(2, message);
}
