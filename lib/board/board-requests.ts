import { BadRequestException, HttpException, ServiceUnavailableException } from '@nestjs/common';
import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import { InvalidLockKeyError } from '../errors/invalid-lock-key.error';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error';
import { LockServiceClosedError } from '../errors/lock-service-closed.error';
import { LockStoreUnavailableError } from '../errors/lock-store-unavailable.error';
import { MAX_HOLDERS_PER_KEY } from '../store/lock-modes';
import { BOARD_MESSAGES } from './board.messages';

/** Keys per page of the board, and the most a caller may ask for. */
export const BOARD_PAGE_SIZE = 100;

/**
 * Query parameter `name`, read from the request's URL as `URLSearchParams` reads it (bad UTF-8 as
 * U+FFFD, `a[b]` a name like any other): Express and Fastify would not agree, nor apps that set
 * their own query parser. Given more than once, a 400.
 */
export const QueryText = createParamDecorator((name: string, context: ExecutionContext) => {
  const request = context.switchToHttp().getRequest<{ originalUrl?: string; url?: string }>();
  const url = request.originalUrl ?? request.url ?? '';
  const start = url.indexOf('?');
  const values = start < 0 ? [] : new URLSearchParams(url.slice(start + 1)).getAll(name);
  if (values.length > 1) throw new BadRequestException(BOARD_MESSAGES.notAString(name));
  return values[0];
});

/** `key`: given once, not empty (the service refuses a key that is not valid). */
export function requiredKey(key: string | undefined): string {
  if (!key) throw new BadRequestException(BOARD_MESSAGES.noKey());
  return key;
}

/** `limit`: digits only, 1 to {@link BOARD_PAGE_SIZE}; absent or empty means a full page. */
export function pageLimit(text: string | undefined): number {
  if (text === undefined || text === '') return BOARD_PAGE_SIZE;
  const limit = /^\d{1,3}$/.test(text) ? Number(text) : NaN;
  if (!(limit >= 1 && limit <= BOARD_PAGE_SIZE)) {
    throw new BadRequestException(BOARD_MESSAGES.badLimit(text, BOARD_PAGE_SIZE));
  }
  return limit;
}

/**
 * `fences`: the holders' fences the page showed, in decimal separated by commas (`16,32`);
 * absent, the release frees whoever holds the key.
 */
export function shownFences(text: string | undefined): bigint[] | undefined {
  if (text === undefined) return undefined;
  const fences = text.split(',');
  if (fences.length > MAX_HOLDERS_PER_KEY || !fences.every((fence) => /^\d{1,20}$/.test(fence))) {
    throw new BadRequestException(BOARD_MESSAGES.badFences(text, MAX_HOLDERS_PER_KEY));
  }
  return fences.map((fence) => BigInt(fence));
}

/**
 * Service errors as HTTP: bad input 400, MongoDB away or the service shutting down 503 (keys
 * shortened: safe to echo).
 */
export async function answer<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof HttpException) throw error;
    if (error instanceof InvalidLockKeyError || error instanceof InvalidLockOptionsError) {
      throw new BadRequestException(error.message);
    }
    if (error instanceof LockStoreUnavailableError || error instanceof LockServiceClosedError) {
      throw new ServiceUnavailableException(error.message);
    }
    throw error;
  }
}

/** What the board reads of a request: what a guard may have left on it, and the peer. */
export interface BoardRequest {
  user?: { id?: unknown; name?: unknown } | null;
  ip?: string;
}

/**
 * Who asked, for the forced-release log: `request.user.id`, else `.name` (as an auth guard
 * leaves them), else the client IP (behind a proxy, only with the platform's trust-proxy).
 */
export function requesterOf(request: BoardRequest): string {
  for (const value of [request.user?.id, request.user?.name]) {
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'bigint') {
      return String(value);
    }
  }
  return `ip ${request.ip ?? 'unknown'}`;
}
