import type { BoundedCommand } from '../bounded-command';

/**
 * Joins sent and not yet settled, by key and token. A join given up on still goes on and may
 * land after its entry ended (a leave, a commit): whoever ends an entry asks here first.
 */
export class JoinsInFlight {
  private readonly byEntry = new Map<string, Set<Promise<unknown>>>();

  /** `join`'s bounded result; its command is kept here until it settles. */
  track<T>(key: string, token: string, join: BoundedCommand<T>): Promise<T> {
    const id = `${token}\0${key}`;
    let joins = this.byEntry.get(id);
    if (!joins) this.byEntry.set(id, (joins = new Set()));
    const settled = join.sent.then(
      () => undefined,
      () => undefined,
    );
    joins.add(settled);
    void settled.then(() => {
      joins.delete(settled);
      if (joins.size === 0 && this.byEntry.get(id) === joins) this.byEntry.delete(id);
    });
    return join.result;
  }

  /** Settles once every join of `token` on `key` sent so far has; undefined if none is pending. */
  settled(key: string, token: string): Promise<void> | undefined {
    const joins = this.byEntry.get(`${token}\0${key}`);
    return joins ? Promise.all([...joins]).then(() => undefined) : undefined;
  }
}
