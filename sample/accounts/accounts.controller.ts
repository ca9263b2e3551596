import { BadRequestException, Body, Controller, HttpCode, Param, Post, Put } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import {
  type DocumentLockHandle,
  type DocumentLocks,
  IfMatch,
  InjectDocumentLocks,
  LockedDoc,
  LockedDocument,
  VersionETag,
} from '../../lib';

/** An account as stored in the `accounts` collection; `version` is bumped by every write. */
export interface Account {
  _id: string;
  balance: number;
  nickname?: string;
  version: number;
}

function positiveAmount(value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new BadRequestException('amount must be a positive integer');
  }
  return value;
}

@ApiTags('accounts')
@Controller('accounts')
export class AccountsController {
  constructor(@InjectDocumentLocks('accounts') private readonly accounts: DocumentLocks<Account>) {}

  /**
   * A lock on the account document itself: read it, decide, then write and unlock in one
   * update (`commit`) that lands only while the lock is still ours. The first deposit creates
   * the account.
   */
  @ApiOperation({ summary: 'Deposit into an account (a document lock with a fenced commit)' })
  @ApiResponse({ status: 423, description: 'Another write to this account is in progress' })
  @Post(':id/deposit')
  @HttpCode(200)
  @VersionETag('version')
  @LockedDocument<Account>('accounts', '{params.id}', {
    timeoutMs: 2_000,
    createIfMissing: { balance: 0 },
  })
  deposit(
    @Body() body: { amount?: unknown },
    @LockedDoc() lock: DocumentLockHandle<Account>,
  ): Promise<Account> {
    const amount = positiveAmount(body?.amount);
    return lock.commit({ $inc: { balance: amount } });
  }

  /**
   * Optimistic versions over HTTP: the client sends back the ETag it got (`If-Match: "3"`); a
   * write made meanwhile answers 412, a request without `If-Match` 428.
   */
  @ApiOperation({ summary: 'Rename an account (If-Match with the ETag of the last read)' })
  @ApiResponse({ status: 412, description: 'The account changed since that ETag' })
  @ApiResponse({ status: 428, description: 'If-Match is missing' })
  @Put(':id/nickname')
  @VersionETag('version')
  rename(
    @Param('id') id: string,
    @IfMatch() version: string,
    @Body() body: { nickname?: unknown },
  ): Promise<Account> {
    if (typeof body?.nickname !== 'string' || body.nickname.length === 0) {
      throw new BadRequestException('nickname must be a non-empty string');
    }
    return this.accounts.updateIfCurrent(id, version, { $set: { nickname: body.nickname } });
  }
}
