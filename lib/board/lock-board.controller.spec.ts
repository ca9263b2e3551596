import { ServiceUnavailableException, type Type } from '@nestjs/common';
import { LockServiceClosedError } from '../errors/lock-service-closed.error';
import { MongoLockError } from '../errors/mongo-lock.error';
import { Test } from '@nestjs/testing';
import { answer, BOARD_PAGE_SIZE, pageLimit } from './board-requests';
import { BOARD_MESSAGES } from './board.messages';
import type { LockBoardController } from './lock-board.controller';
import { MongoLockBoardModule } from './mongo-lock-board.module';

describe('the lock board without MongoLockModule', () => {
  it('says to import MongoLockModule, not Nest’s generic "could not find" error', async () => {
    const board = MongoLockBoardModule.forRoot();
    const moduleRef = await Test.createTestingModule({ imports: [board] }).compile();
    const controller = moduleRef.get<LockBoardController>(
      board.controllers![0] as Type<LockBoardController>,
    );
    const error = await controller.one('orders:1').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MongoLockError);
    expect((error as Error).message).toBe(BOARD_MESSAGES.noLockService());
    await moduleRef.close();
  });
});

describe('the board’s limit message', () => {
  it('states the range the board accepts', () => {
    expect(() => pageLimit(String(BOARD_PAGE_SIZE + 1))).toThrow(
      `limit must be an integer from 1 to ${BOARD_PAGE_SIZE}, got "${BOARD_PAGE_SIZE + 1}"`,
    );
  });

  it('takes the largest page from its caller rather than a number of its own', () => {
    expect(BOARD_MESSAGES.badLimit('26', 25)).toBe(
      'limit must be an integer from 1 to 25, got "26"',
    );
  });
});

describe('the board’s answers to service errors', () => {
  it('answers 503, not 500, while the service shuts down', async () => {
    const closed = answer(() => Promise.reject(new LockServiceClosedError('closed')));
    await expect(closed).rejects.toBeInstanceOf(ServiceUnavailableException);
  });

  it('passes on an error it does not know', async () => {
    const unknown = new Error('not the service’s');
    await expect(answer(() => Promise.reject(unknown))).rejects.toBe(unknown);
  });
});
