import { boundedCommand } from '../bounded-command';
import { isStoreUnavailableError } from '../mongo-error-codes';
import type { ServerMonitor } from '../server-monitor';

/**
 * How many joins of one entry may be unanswered at once: the first, and one copy sent again
 * after `operationTimeoutMs` (on another connection, should the first's have gone silent).
 * More copies would only pile onto a server that has fallen behind.
 */
const UNANSWERED_JOINS = 2;

interface JoinCopy<T> {
  reply: Promise<T>;
  state: 'unanswered' | 'answered' | 'failed';
}

/**
 * The joins of each entry (by key and token) sent so far. A try answers with the first reply
 * among them, one its predecessor stopped waiting for included, so a server slower than
 * `operationTimeoutMs` still places a patient wait; a try sends a copy only while fewer than
 * {@link UNANSWERED_JOINS} are unanswered and none answered. A join given up on still goes on
 * and may land after its entry ended (a leave, a commit): whoever ends an entry asks here first.
 */
export class JoinsInFlight {
  /** Per entry, the copies no try has taken a reply from yet. */
  private readonly unclaimed = new Map<string, JoinCopy<unknown>[]>();
  /** Per entry, the copies not settled yet. */
  private readonly unsettled = new Map<string, Set<Promise<unknown>>>();

  /** `serverMonitor` names why MongoDB does not answer a join cut by its bound. */
  constructor(private readonly serverMonitor?: ServerMonitor) {}

  /**
   * The first reply to a join of `token` on `key`, bounded by `timeoutMs`; `send` sends a copy
   * (`retry`: an earlier one is unanswered and may land).
   */
  join<T>(
    key: string,
    token: string,
    timeoutMs: number,
    send: (retry: boolean) => Promise<T>,
  ): Promise<T> {
    const id = entryId(key, token);
    const copies = (this.unclaimed.get(id) ?? []).filter(
      (copy) => copy.state !== 'failed',
    ) as JoinCopy<T>[];
    const unanswered = copies.filter((copy) => copy.state === 'unanswered').length;
    const answered = copies.length > unanswered;
    if (!answered && unanswered < UNANSWERED_JOINS) {
      copies.push(this.sent(id, () => send(unanswered > 0)));
    }
    this.unclaimed.set(id, copies);
    const replies = copies.map((copy) => copy.reply);
    const forget = () => {
      if (this.unclaimed.get(id) === copies) this.unclaimed.delete(id);
    };
    const bounded = boundedCommand(
      'acquire',
      timeoutMs,
      () => firstReply(replies),
      this.serverMonitor,
    );
    return bounded.result.then(
      (reply) => {
        forget();
        return reply;
      },
      (error: unknown) => {
        // Every copy refused or failed: none is left to answer a later try (which may not come).
        if (copies.every((copy) => copy.state === 'failed')) forget();
        throw error;
      },
    );
  }

  /**
   * The entry ended: no try takes a reply from its joins any more. Settles once every copy
   * sent so far has; undefined if none is unsettled.
   */
  settled(key: string, token: string): Promise<void> | undefined {
    const id = entryId(key, token);
    this.unclaimed.delete(id);
    const copies = this.unsettled.get(id);
    return copies ? Promise.allSettled([...copies]).then(() => undefined) : undefined;
  }

  private sent<T>(id: string, send: () => Promise<T>): JoinCopy<T> {
    const copy: JoinCopy<T> = { reply: Promise.resolve().then(send), state: 'unanswered' };
    let copies = this.unsettled.get(id);
    if (!copies) this.unsettled.set(id, (copies = new Set()));
    copies.add(copy.reply);
    const settle = (state: JoinCopy<T>['state']) => () => {
      copy.state = state;
      copies.delete(copy.reply);
      if (copies.size === 0 && this.unsettled.get(id) === copies) this.unsettled.delete(id);
    };
    copy.reply.then(settle('answered'), settle('failed'));
    return copy;
  }
}

const entryId = (key: string, token: string) => `${token}\0${key}`;

/**
 * The first reply among `replies`, or the first refusal (a decided answer, such as a document
 * no longer found); if each fails for MongoDB's silence or absence, the last failure.
 */
function firstReply<T>(replies: Promise<T>[]): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let unavailable = 0;
    for (const reply of replies) {
      reply.then(resolve, (error: unknown) => {
        const another = isStoreUnavailableError(error) && ++unavailable < replies.length;
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the copy's own error
        if (!another) reject(error);
      });
    }
  });
}
