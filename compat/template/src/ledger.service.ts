import { Injectable } from '@nestjs/common';
import { Locked, LockService } from 'nestjs-mongo-lock';

export interface LedgerEntry {
  account: string;
  cents: number;
  /** What `LockService.current()` saw inside the method. */
  key: string | null;
  fence: string | null;
  /** Whether the store showed that very lease held while the method ran. */
  heldByThisCall: boolean;
}

@Injectable()
export class LedgerService {
  constructor(private readonly locks: LockService) {}

  @Locked('ledger:{args.0}', { ttlMs: 10_000, timeoutMs: 0 })
  async post(account: string, cents: number): Promise<LedgerEntry> {
    const lock = LockService.current();
    const state = lock ? await this.locks.inspect(lock.key) : null;
    return {
      account,
      cents,
      key: lock?.key ?? null,
      fence: lock ? lock.fence.toString() : null,
      heldByThisCall: state !== null && state.held && state.fence === lock?.fence,
    };
  }
}
