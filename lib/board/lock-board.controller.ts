import {
  ConflictException,
  Controller,
  ForbiddenException,
  Get,
  Header,
  Headers,
  HttpCode,
  Inject,
  Logger,
  NotFoundException,
  Post,
  Req,
  Res,
  Sse,
  UseGuards,
  applyDecorators,
} from '@nestjs/common';
import type { CanActivate, MessageEvent, Type } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { distinctUntilChanged, endWith, ignoreElements, map, merge, skipWhile } from 'rxjs';
import { finalize, takeUntil, tap, timer, type Observable } from 'rxjs';
import { MongoLockError } from '../errors/mongo-lock.error';
import { LockService } from '../lock.service';
import { eventJson, holderJson, lockJson } from './board-json';
import type { BoardLockJson, BoardLockPageJson, BoardReleaseJson } from './board-json';
import type { ResolvedBoardOptions } from './board-options';
import { BOARD_PAGE_HEADERS, boardPage } from './board-page';
import { answer, pageLimit, QueryText, requesterOf, requiredKey } from './board-requests';
import { shownFences } from './board-requests';
import type { BoardRequest } from './board-requests';
import { BOARD_MESSAGES } from './board.messages';

export const MONGO_LOCK_BOARD_OPTIONS = Symbol('MONGO_LOCK:BOARD_OPTIONS');

/** How often the event stream looks whether changes reach it. */
const FLOW_CHECK_MS = 250;
/** A new connection's change stream takes a moment to open: not live only if it has not by then. */
const OPEN_GRACE_MS = 2_000;

/** The read-only board over `LockService`; `boardControllerFor` mounts a subclass at the path. */
export class LockBoardController {
  protected readonly logger = new Logger('MongoLockBoard');
  private service: LockService | undefined;

  constructor(
    @Inject(ModuleRef) private readonly moduleRef: ModuleRef,
    @Inject(MONGO_LOCK_BOARD_OPTIONS) protected readonly options: ResolvedBoardOptions,
  ) {}

  /** The app's `LockService`, wherever `MongoLockModule` was imported (global or not). */
  protected get locks(): LockService {
    try {
      return (this.service ??= this.moduleRef.get<LockService>(LockService, { strict: false }));
    } catch (error) {
      // Nest throws its generic "could not find" error when no module provides the service.
      throw new MongoLockError(BOARD_MESSAGES.noLockService(), { cause: error });
    }
  }

  @Get()
  @applyDecorators(
    ...Object.entries(BOARD_PAGE_HEADERS).map(([name, value]) => Header(name, value)),
  )
  page(): string {
    return boardPage(this.options.allowRelease);
  }

  @Get('api/locks')
  async list(
    @QueryText('prefix') prefix: string | undefined,
    @QueryText('after') after: string | undefined,
    @QueryText('limit') limit: string | undefined,
  ): Promise<BoardLockPageJson> {
    // '' means "not given", as a cleared filter field sends it.
    const query = { prefix: prefix || undefined, after: after || undefined };
    const size = pageLimit(limit);
    // One key more than the page tells whether a next page exists.
    const found = await answer(() => this.locks.list({ ...query, limit: size + 1 }));
    const locks = found.slice(0, size);
    return { locks: locks.map(lockJson), next: found.length > size ? locks[size - 1].key : null };
  }

  // Key in the query: browsers drop a `.` or `..` path segment (even encoded); both are valid keys.
  @Get('api/lock')
  async one(@QueryText('key') key: string | undefined): Promise<BoardLockJson> {
    const valid = requiredKey(key);
    const state = await answer(() => this.locks.inspect(valid));
    if (state === null) throw new NotFoundException(BOARD_MESSAGES.noSuchKey(valid));
    return lockJson(state);
  }

  @Sse('api/events')
  async events(
    @Req() request: StreamRequest,
    @Res({ passthrough: true }) response: StreamResponse,
  ): Promise<Observable<MessageEvent>> {
    // Connected first, so that MongoDB unreachable is a 503 before the stream's headers go out.
    await answer(() => this.locks.start());
    const changes = this.locks.events$.pipe(map((event) => ({ data: eventJson(event) })));
    // Ends with events$, which completes when the service closes: shutdown never waits on it.
    let shuttingDown = false;
    const changesEnd = this.locks.events$.pipe(
      ignoreElements(),
      endWith(null),
      tap(() => (shuttingDown = true)),
    );
    // The page says "live" only while changes reach this stream (not while polling or reopening).
    const flow = timer(0, FLOW_CHECK_MS).pipe(
      takeUntil(changesEnd),
      map(() => this.locks.diagnostics.eventsFlowing),
      skipWhile((live, index) => !live && index * FLOW_CHECK_MS < OPEN_GRACE_MS),
      distinctUntilChanged(),
      map((live) => ({ type: 'flow', data: { live } })),
    );
    // A guard runs once per connection: ending each after a while asks it again.
    return merge(changes, flow).pipe(
      takeUntil(timer(this.options.eventStreamMaxMs)),
      endWith({ type: 'reconnect', data: {} }),
      // At shutdown only: a planned end's connection serves the page's next requests.
      finalize(() => shuttingDown && closeConnectionAfter(request, response)),
    );
  }
}

/** An event stream's request and response: Express's, or Fastify's with Node's as `raw`. */
type StreamRequest = { raw?: IncomingMessage } & Partial<IncomingMessage>;
type StreamResponse = { raw?: ServerResponse } & Partial<ServerResponse>;

/**
 * Closes a stream's HTTP/1 connection once its response is sent, at shutdown (when `events$`
 * completes): still busy as the server closes its idle connections, a browser's keep-alive
 * connection would hold up the close until its timeout. (HTTP/2 streams share a session.)
 */
function closeConnectionAfter(request: StreamRequest, response: StreamResponse): void {
  const incoming = (request.raw ?? request) as IncomingMessage;
  const outgoing = (response.raw ?? response) as ServerResponse;
  const socket = outgoing.socket ?? incoming.socket;
  if (incoming.httpVersionMajor !== 1 || !socket) return;
  // Nest ends the response once its last events are written: only then.
  if (outgoing.writableFinished) socket.end();
  else outgoing.once('finish', () => socket.end());
}

/** The board with the forced release (`allowRelease`), which only a guard may let through. */
export class LockBoardReleaseController extends LockBoardController {
  @Post('api/lock/release')
  @HttpCode(200)
  async release(
    @QueryText('key') given: string | undefined,
    @QueryText('fences') shown: string | undefined,
    @Req() request: BoardRequest,
    @Headers('x-lock-board') marker: unknown,
    @Headers('sec-fetch-site') site: unknown,
  ): Promise<BoardReleaseJson> {
    if (marker !== 'release') throw new ForbiddenException(BOARD_MESSAGES.releaseHeaderMissing());
    // A browser says where the request comes from: only the board's own page may release (an
    // app whose CORS lets any origin send the header still refuses other sites).
    if (site !== undefined && site !== 'same-origin') {
      throw new ForbiddenException(BOARD_MESSAGES.releaseFromOtherSite());
    }
    const key = requiredKey(given);
    const fences = shownFences(shown);
    // With the fences shown, only those holders: one that took the key since is never freed.
    const released = await answer(() => this.locks.forceRelease(key, fences && { fences }));
    if (fences && released.length === 0) {
      this.logger.warn(BOARD_MESSAGES.staleRelease(key, requesterOf(request), fences));
      throw new ConflictException(BOARD_MESSAGES.holdersChanged(key, fences));
    }
    const holders = released.map((holder) => `${holder.holderId} (fence ${holder.fence})`);
    this.logger.warn(BOARD_MESSAGES.forcedRelease(key, requesterOf(request), holders.join(', ')));
    return { key, released: released.map(holderJson) };
  }
}

/** A fresh controller class mounted at the board's path, behind `guard` (see `board-guard.ts`). */
export function boardControllerFor(
  options: ResolvedBoardOptions,
  guard: Type<CanActivate> | undefined,
): Type<LockBoardController> {
  const Base = options.allowRelease ? LockBoardReleaseController : LockBoardController;
  class MongoLockBoardController extends Base {}
  Controller(options.path)(MongoLockBoardController);
  if (guard) UseGuards(guard)(MongoLockBoardController);
  return MongoLockBoardController;
}
