/**
 * Milliseconds on the machine's monotonic clock, which every process of one machine reads
 * alike, so that intervals from different processes can be compared. Not the wall clock: a
 * process's `performance.timeOrigin` is the wall clock when it started, so two processes
 * started while the system clock was being set disagree by that step for their whole lives
 * (a fault run once saw a worker 6 ms ahead of the others, as overlaps that never happened).
 * Patching `Date` (clock-skew scenarios) does not move it either.
 */
export function sharedClockMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
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
