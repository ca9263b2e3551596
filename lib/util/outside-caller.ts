import { AsyncResource } from 'node:async_hooks';

/** The async context of this module's load: no caller's request, trace or lock. */
const outside = new AsyncResource('nestjs-mongo-lock');

/**
 * Runs `work`, background work that outlives its call (a lease's renewals, the service's start
 * and change streams), outside the caller's async context: what it sends joins no request's
 * trace, nor an acquisition's span long ended, for as long as the lock or the service lasts.
 */
export function outsideCaller<T>(work: () => T): T {
  return outside.runInAsyncScope(work);
}
