import { Controller, Get, Param, Post, Query } from '@nestjs/common';
import { LockHandleParam, Locked } from 'nestjs-mongo-lock';
import type { LockHandle } from 'nestjs-mongo-lock';
import { type LedgerEntry, LedgerService } from './ledger.service.js';

export interface ItemView {
  id: string;
  key: string;
  fence: string;
}

@Controller()
export class ItemsController {
  constructor(private readonly ledger: LedgerService) {}

  /** Busy: 423 with Retry-After. */
  @Get('items/:id')
  @Locked('item:{params.id}', { timeoutMs: 0 })
  item(@Param('id') id: string, @LockHandleParam() lock: LockHandle): ItemView {
    return { id, key: lock.key, fence: lock.fence.toString() };
  }

  /** A key that cannot be built from the request (no `id`, or several): 400. */
  @Get('items')
  @Locked('item:{query.id}', { timeoutMs: 0 })
  itemByQuery(@Query('id') id: string): { id: string } {
    return { id };
  }

  /** Not locked itself: the provider method it calls is. */
  @Post('ledger/:account')
  post(@Param('account') account: string): Promise<LedgerEntry> {
    return this.ledger.post(account, 100);
  }
}
