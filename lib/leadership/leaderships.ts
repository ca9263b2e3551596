import { optionsObject } from '../option-checks';
import { validateTtlMs } from '../options';
import { leaderKey } from './leader-key';
import { Leadership, type LeadershipHost, type LeadershipOptions } from './leadership';

/** The leaderships of one `LockService`: the one record of which names it stands for. */
export class Leaderships {
  private readonly byName = new Map<string, Leadership>();

  constructor(private readonly host: LeadershipHost) {}

  /** The leadership of `name`, made on first use; once its `ttlMs` is set, another one throws. */
  get(name: string, options?: LeadershipOptions | null): Leadership {
    const key = leaderKey(name);
    const given = optionsObject(options, ['ttlMs']);
    const ttlMs = given.ttlMs === undefined ? undefined : validateTtlMs('ttlMs', given.ttlMs);
    const known = this.byName.get(name);
    if (known) {
      known.useTtl(ttlMs);
      return known;
    }
    const leadership = new Leadership(name, key, ttlMs, this.host);
    this.byName.set(name, leadership);
    return leadership;
  }

  /** Whether this instance leads, per name it stands for now (health and metrics). */
  leading(): Map<string, boolean> {
    const standing = [...this.byName].filter(([, leadership]) => leadership.standing);
    return new Map(standing.map(([name, leadership]) => [name, leadership.isLeader]));
  }

  /** Resigns every leadership for good; first at shutdown, so that others take over at once. */
  async closeAll(): Promise<void> {
    await Promise.all([...this.byName.values()].map((leadership) => leadership.close()));
  }
}
