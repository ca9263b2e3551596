import { randomBytes } from 'node:crypto';
import type { EntryListener, LineWaiters } from './waiting/line-waiters';

/** 96 random bits, short on the wire: every command carries it. */
export function newToken(): string {
  return randomBytes(12).toString('base64url');
}

/** One call's entry in a key's line: its token, and whether the line may hold it. */
export class LineEntryState {
  token = newToken();
  /** `unknown`: a join with no reply may have made it. */
  state: 'none' | 'joined' | 'unknown' = 'none';
  private listening: EntryListener | undefined;

  constructor(
    private readonly waiters: LineWaiters,
    private readonly key: string,
  ) {}

  /**
   * Listens for news that the entry holds: before the join is sent (the event may beat its reply);
   * not at all for a caller taking over an entry of ours.
   */
  listen(): EntryListener {
    return (this.listening ??= this.waiters.wait(this.key, this.token));
  }

  stopListening(): void {
    this.listening?.stop();
    this.listening = undefined;
  }

  /** Our entry ran out: a new token, for a new join. */
  renewToken(): void {
    this.stopListening();
    this.token = newToken();
    this.state = 'none';
  }
}
