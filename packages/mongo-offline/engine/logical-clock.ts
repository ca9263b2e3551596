import { Timestamp } from 'bson';

/**
 * The cluster time: a BSON Timestamp whose seconds follow the wall clock and whose increment
 * orders events within a second. Every write ticks it, so oplog entries are strictly ordered.
 */
export class LogicalClock {
  private seconds = 0;
  private increment = 0;

  constructor() {
    this.tick();
  }

  tick(): Timestamp {
    const nowSeconds = Math.floor(Date.now() / 1000);
    if (nowSeconds > this.seconds) {
      this.seconds = nowSeconds;
      this.increment = 1;
    } else {
      this.increment += 1;
    }
    return this.now();
  }

  now(): Timestamp {
    return new Timestamp({ t: this.seconds, i: this.increment });
  }
}
