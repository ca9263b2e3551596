import type { ModuleRef, Reflector } from '@nestjs/core';
import { LockNotAcquiredError } from '../errors';
import { retryAfterSecondsOf } from '../http/document-http-errors';
import { LockedInterceptor } from './locked.interceptor';

/** The interceptor with its protected Retry-After hook in reach. */
class RetryAfterProbe extends LockedInterceptor {
  constructor() {
    super({} as Reflector, {} as ModuleRef);
  }

  secondsFor(retryAfterMs: number | undefined): number {
    return this.retryAfterSeconds(new LockNotAcquiredError('busy', { keys: ['k'], retryAfterMs }));
  }
}

describe('LockedInterceptor.retryAfterSeconds', () => {
  it.each([
    [undefined, 1],
    [0, 1],
    [1, 1],
    [1000, 1],
    [1001, 2],
    [59_500, 60],
  ])('gives %j ms as %j s, as the document routes do', (retryAfterMs, seconds) => {
    expect(new RetryAfterProbe().secondsFor(retryAfterMs)).toBe(seconds);
    expect(retryAfterSecondsOf(retryAfterMs)).toBe(seconds);
  });
});
