import type { Document } from 'bson';

/** A fail point's activation rule, as `configureFailPoint` takes it. */
export type FailPointMode =
  'alwaysOn' | 'off' | { times?: number; skip?: number; activationProbability?: number };

interface ActiveFailPoint {
  data: Document;
  alwaysOn: boolean;
  timesLeft: number;
  skipLeft: number;
}

/** The offline server's fail points (`failCommand` and the others `configureFailPoint` accepts). */
export class FailPoints {
  private readonly active = new Map<string, ActiveFailPoint>();
  /** Times each fail point has fired since the server started, across configurations. */
  private readonly entered = new Map<string, number>();
  /** `waitFor` calls not yet answered, checked whenever a fail point fires. */
  private readonly waiters = new Set<{ name: string; times: number; wake: () => void }>();

  /**
   * Sets the fail point's mode and returns how many times it has fired so far (MongoDB's
   * `count`, which a new configuration does not reset: a test compares it before and after).
   */
  configure(name: string, mode: FailPointMode, data: Document = {}): number {
    this.active.delete(name);
    if (mode === 'alwaysOn') {
      this.active.set(name, { data, alwaysOn: true, timesLeft: 0, skipLeft: 0 });
    } else if (mode !== 'off') {
      const times = mode.times ?? (mode.skip !== undefined ? Number.MAX_SAFE_INTEGER : 0);
      if (times > 0) {
        this.active.set(name, {
          data,
          alwaysOn: false,
          timesLeft: times,
          skipLeft: mode.skip ?? 0,
        });
      }
    }
    return this.entered.get(name) ?? 0;
  }

  /**
   * The fail point's data if it fires for this occurrence (consuming one activation), else
   * undefined. `applies` decides whether the occurrence is one the fail point targets.
   */
  fire(name: string, applies: (data: Document) => boolean): Document | undefined {
    const point = this.active.get(name);
    if (!point || !applies(point.data)) return undefined;
    if (!point.alwaysOn) {
      if (point.skipLeft > 0) {
        point.skipLeft -= 1;
        return undefined;
      }
      point.timesLeft -= 1;
      if (point.timesLeft <= 0) this.active.delete(name);
    }
    const entered = (this.entered.get(name) ?? 0) + 1;
    this.entered.set(name, entered);
    for (const waiter of this.waiters) {
      if (waiter.name === name && entered >= waiter.times) waiter.wake();
    }
    return point.data;
  }

  /**
   * Resolves true once the fail point has fired `times` times since the server started
   * (`waitForFailPoint`), or false after `ms`.
   */
  waitFor(name: string, times: number, ms: number): Promise<boolean> {
    if ((this.entered.get(name) ?? 0) >= times) return Promise.resolve(true);
    return new Promise((resolve) => {
      const settle = (reached: boolean): void => {
        clearTimeout(timer);
        this.waiters.delete(waiter);
        resolve(reached);
      };
      const waiter = { name, times, wake: () => settle(true) };
      // Node runs a longer timeout at once; a waiting command must not keep the process alive.
      const timer = setTimeout(() => settle(false), Math.min(ms, 2 ** 31 - 1));
      timer.unref();
      this.waiters.add(waiter);
    });
  }
}
