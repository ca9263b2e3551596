import { randomBytes } from 'node:crypto';
import type { LineWaiters } from './waiting/line-waiters';

/** 96 random bits, short on the wire: every command carries it. */
export function newToken(): string {
  return randomBytes(12).toString('base64url');
}

/** One call's entry in a key's line: its token, and whether the line may hold it. */
export class LineEntryState {
  token = newToken();
  /** `unknown`: a write with no reply may have made or kept it. */
  state: 'none' | 'joined' | 'unknown' = 'none';
  private listening: { heard: Promise<unknown>; stop: () => void } | undefined;

  constructor(
    private readonly waiters: LineWaiters,
    private readonly key: string,
  ) {}

  /**
   * Settles when a change event or a release here says the entry holds. Listening starts
   * before the join is sent (the event may come before its reply), and not at all for a caller
   * that takes over an entry of ours instead.
   */
  listen(): Promise<unknown> {
    this.listening ??= this.waiters.wait(this.key, this.token);
    return this.listening.heard;
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
