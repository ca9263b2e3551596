import { boundedCommand } from '../bounded-command';
import { firstReply } from './joins-in-flight';

/** A reply, with when its command was sent (monotonic ms): a lease it reports runs from then. */
export type Sent<T> = T & { sentAt: number };

/**
 * How many renewals of one entry, asking one lease, may be unanswered at once (as for joins,
 * `UNANSWERED_JOINS`): more copies would only pile onto a server that has fallen behind.
 */
const UNANSWERED_RENEWALS = 2;

/** A renewal: whose entry, and the lease it asks (`exactly`: `expireIn`'s). */
export interface RenewalOf {
  key: string;
  token: string;
  ttlMs: number;
  exactly: boolean;
}

/**
 * The renewals of each entry not answered yet. A try waits for the first reply among them and
 * sends a copy only while fewer than {@link UNANSWERED_RENEWALS} are unanswered. A reply carries
 * its own copy's send time, never the try's: an older copy's lease must not be counted from
 * later. Answered copies are dropped at once: a later renewal must run from a later time.
 */
export class RenewalsInFlight {
  private readonly unanswered = new Map<string, Promise<Sent<object>>[]>();

  /** The first reply to a renewal of `token`'s entry on `key` for `ttlMs`, within `timeoutMs`. */
  renew<T extends object>(
    { key, token, ttlMs, exactly }: RenewalOf,
    timeoutMs: number,
    send: () => Promise<T>,
  ): Promise<Sent<T>> {
    const id = `${token}\0${key}\0${ttlMs}\0${exactly}`;
    const copies = (this.unanswered.get(id) ?? []) as Promise<Sent<T>>[];
    if (copies.length < UNANSWERED_RENEWALS) {
      const sentAt = performance.now();
      const copy = Promise.resolve()
        .then(send)
        .then((reply) => ({ ...reply, sentAt }));
      copies.push(copy);
      this.unanswered.set(id, copies);
      const drop = () => {
        void copies.splice(copies.indexOf(copy), 1);
        if (copies.length === 0 && this.unanswered.get(id) === copies) this.unanswered.delete(id);
      };
      copy.then(drop, drop);
    }
    return boundedCommand('renew', timeoutMs, () => firstReply([...copies])).result;
  }
}
