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

/** The fail points the offline server implements: `failCommand` and `onPrimaryTransactionalWrite`. */
export class FailPoints {
  private readonly active = new Map<string, ActiveFailPoint>();

  /** Returns how many times the previous configuration had fired (MongoDB's `count`). */
  configure(name: string, mode: FailPointMode, data: Document = {}): void {
    if (mode === 'off') {
      this.active.delete(name);
      return;
    }
    if (mode === 'alwaysOn') {
      this.active.set(name, { data, alwaysOn: true, timesLeft: 0, skipLeft: 0 });
      return;
    }
    const times = mode.times ?? (mode.skip !== undefined ? Number.MAX_SAFE_INTEGER : 0);
    if (times <= 0) {
      this.active.delete(name);
      return;
    }
    this.active.set(name, { data, alwaysOn: false, timesLeft: times, skipLeft: mode.skip ?? 0 });
  }

  /**
   * The fail point's data if it fires for this occurrence (consuming one activation), else
   * undefined. `applies` decides whether the occurrence is one the fail point targets.
   */
  fire(name: string, applies: (data: Document) => boolean): Document | undefined {
    const point = this.active.get(name);
    if (!point || !applies(point.data)) return undefined;
    if (point.alwaysOn) return point.data;
    if (point.skipLeft > 0) {
      point.skipLeft -= 1;
      return undefined;
    }
    point.timesLeft -= 1;
    if (point.timesLeft <= 0) this.active.delete(name);
    return point.data;
  }

  clear(): void {
    this.active.clear();
  }
}
