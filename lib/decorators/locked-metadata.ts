import type { AcquireOptions } from '../interfaces/lock-options.interface';
import type { LockKeyResolver } from '../keys/key-template';
import { LOCKED_METADATA } from '../mongo-lock.constants';

/** Options of `@Locked`: a subset of `AcquireOptions` (no `signal`: the call's lifetime is the signal). */
export type LockedOptions = Pick<AcquireOptions, 'ttlMs' | 'timeoutMs' | 'renew'>;

/** What `@Locked` records on a method. One object per decorated method, also its identity. */
export interface LockedMetadata {
  readonly className: string;
  readonly methodName: string;
  /** `Class.method`, for messages. */
  readonly where: string;
  readonly resolveKeys: LockKeyResolver;
  readonly options: LockedOptions;
}

/** Reads `@Locked` metadata from a method (its own or copied from the function it wraps). */
export function getLockedMetadata(method: unknown): LockedMetadata | undefined {
  if (typeof method !== 'function') return undefined;
  return Reflect.getMetadata(LOCKED_METADATA, method) as LockedMetadata | undefined;
}
