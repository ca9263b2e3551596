import { performance } from 'node:perf_hooks';

/**
 * Milliseconds on a clock that all processes of one machine share closely enough to compare
 * intervals: each process's monotonic clock anchored at its start on the system clock.
 * Patching `Date` (clock-skew scenarios) does not move it.
 */
export function sharedClockMs(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * Shifts `Date` and `Date.now` by `skewMs` in this process, as a machine whose wall clock is
 * wrong would see them. Must run before the library is loaded.
 */
export function installClockSkew(skewMs: number): void {
  if (skewMs === 0) return;
  const RealDate = Date;
  const skewedNow = (): number => RealDate.now() + skewMs;
  // A proxy keeps `instanceof Date` and every static method; only "now" moves.
  globalThis.Date = new Proxy(RealDate, {
    construct: (target, args: unknown[], newTarget: new (...a: unknown[]) => unknown) =>
      Reflect.construct(target, args.length === 0 ? [skewedNow()] : args, newTarget) as object,
    apply: () => new RealDate(skewedNow()).toString(),
    get: (target, property, receiver) =>
      property === 'now' ? skewedNow : (Reflect.get(target, property, receiver) as unknown),
  });
}
