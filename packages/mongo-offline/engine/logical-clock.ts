import { Timestamp } from 'bson';

/**
 * The cluster time: a BSON Timestamp whose seconds follow the wall clock and whose increment
 * orders events within a second. Every write ticks it, so oplog entries are strictly ordered.
 */
/**
 * The last time any clock of this process issued: a server restarted in this process starts
 * after it, as a mongod's history does after a restart (which takes longer than a second), so a
 * resume point of the old server is older than the new one's history. (A restart in another
 * process within the same second is not covered.)
 */
let lastIssued = { seconds: 0, increment: 0 };

export class LogicalClock {
  private seconds = lastIssued.seconds;
  private increment = lastIssued.increment;

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
    lastIssued = { seconds: this.seconds, increment: this.increment };
    return this.now();
  }

  now(): Timestamp {
    return new Timestamp({ t: this.seconds, i: this.increment });
  }
}
