// Messages of the lock board, as functions so that wording lives in one place.

const quote = (text: string) => JSON.stringify(text);

export const BOARD_MESSAGES = {
  releaseNeedsGuard: () =>
    'MongoLockBoardModule.forRoot({ allowRelease: true }) needs a guard: anyone who can reach ' +
    'the board could otherwise free any lock. Pass guard: YourAdminGuard, or leave allowRelease off.',
  badPath: (path: unknown) =>
    `MongoLockBoardModule.forRoot: path must be a non-empty string of letters, digits and . _ ~ - /, got ${
      typeof path === 'string' ? quote(path) : typeof path
    }`,
  badGuard: () =>
    'MongoLockBoardModule.forRoot: guard must be a guard class or an object with canActivate()',
  badEventStreamMaxMs: (value: unknown) =>
    `MongoLockBoardModule.forRoot: eventStreamMaxMs must be an integer from 1000 to 3600000 (ms), got ${
      typeof value === 'number' ? value : typeof value
    }`,
  noLockService: () =>
    'MongoLockBoardModule found no LockService: import MongoLockModule.forRoot() in the app too',
  // The page size is passed in: importing it from board-requests.ts would make an import cycle.
  badLimit: (limit: string, pageSize: number) =>
    `limit must be an integer from 1 to ${pageSize}, got ${quote(limit.slice(0, 32))}`,
  notAString: (name: string) => `${name} must be given once, as a string`,
  noKey: () => 'key must be given: ?key=<the lock key>',
  noSuchKey: (key: string) => `No lock document for key ${quote(key.slice(0, 64))}`,
  releaseHeaderMissing: () =>
    'A release must carry the header X-Lock-Board: release (a plain form on another site cannot send it)',
  releaseFromOtherSite: () =>
    'A release must come from the board page itself (Sec-Fetch-Site: same-origin)',
  forcedRelease: (key: string, who: string, released: string) =>
    `Forced release of ${quote(key)} asked by ${quote(who)}: ${released || 'no live holder'}`,
  badFences: (text: string, most: number) =>
    `fences must be 1 to ${most} fences (decimal digits) separated by commas, got ${quote(
      text.slice(0, 64),
    )}`,
  holdersChanged: (key: string, fences: readonly bigint[]) =>
    `Nothing released: none of the holders shown (fence ${fenceList(fences)}) holds ${quote(
      key.slice(0, 64),
    )} any more. Look at its holders again before releasing.`,
  staleRelease: (key: string, who: string, fences: readonly bigint[]) =>
    `Forced release of ${quote(key)} asked by ${quote(who)} released nothing: the holders shown ` +
    `(fence ${fenceList(fences)}) no longer hold it`,
};

/** The first fences of a list (a semaphore's may run to 1,000), for messages and logs. */
function fenceList(fences: readonly bigint[]): string {
  const more = fences.length - 10;
  return fences.slice(0, 10).join(', ') + (more > 0 ? ` and ${more} more` : '');
}
