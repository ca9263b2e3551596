import type { LibraryMutant } from '../harness/library-mutant';
import { runReadersWriters } from './modes-readers-writers';
import { runReleaseScope } from './modes-release-scope';
import { runSemaphore } from './modes-semaphore';
import { runTransaction } from './modes-transaction';

const attemptPipeline = 'store/attempt-pipeline.ts';

export const modesMutants: LibraryMutant[] = [
  {
    name: 'a shared grant ignores a live exclusive holder',
    // The entry modes' grant (`entry ? {…}`) loses its first condition; the exclusive grant
    // (`: {…}`) keeps its own.
    patches: [
      {
        file: attemptPipeline,
        anchor: "    ? {\n        $and: [\n          { $not: ['$_m.excl'] },\n",
        replacement:
          '    ? {\n        $and: [\n          // mutant: no check of the exclusive lease\n',
      },
    ],
    run: (server, libDir) => runReadersWriters(server, { libDir, kills: 0, durationMs: 6000 }),
    caughtAs: ['overlap'],
    accept: (v) => v.detail.includes('[exclusive]'),
  },
  {
    name: 'a semaphore grant ignores its capacity',
    patches: [
      {
        file: attemptPipeline,
        anchor: 'const capacity = mode.permits ?? MAX_HOLDERS_PER_KEY;',
        replacement: 'const capacity = MAX_HOLDERS_PER_KEY; // mutant: permits ignored',
      },
    ],
    run: (server, libDir) => runSemaphore(server, { libDir, pauses: 0, durationMs: 6000 }),
    caughtAs: ['over-capacity'],
  },
  {
    name: 'releaseScope counts the holder entries of the scope but leaves them live',
    patches: [
      {
        file: 'store/holder-entries.ts',
        // The scope's entries are removed (d0f8ec4 on) ...
        anchor: "holders: { $cond: [{ $gt: [{ $size: '$_n' }, 0] }, kept, '$holders'] },",
        replacement: "holders: '$holders', // mutant: the scope's entries stay live",
        // ... or marked released (0b68f49).
        or: [
          {
            anchor: "{ k: '$$this.k', v: { $mergeObjects: ['$$this.v', { releasedAt: NOW }] } },",
            replacement: "'$$this', // mutant: the scope's entries stay live",
          },
        ],
      },
    ],
    run: (server, libDir) => runReleaseScope(server, { libDir, rounds: 1 }),
    caughtAs: ['told-late'],
  },
  ...(['v1', 'v2'] as const).map(unprovenCommit),
];

/** A transaction that commits with no proof that its lock is still held, on `engine`. */
function unprovenCommit(engine: 'v1' | 'v2'): LibraryMutant {
  return {
    name: `a transaction commits without proving its lock is still held (engine ${engine})`,
    patches: [
      {
        file: 'lock-transaction.ts',
        anchor: 'if (!(await store.confirmHeldIn(key, owner, session))) {',
        replacement: 'if (!(await store.confirmHeldIn(key, owner, session)) && false) {',
      },
      {
        file: 'lock-transaction.ts',
        anchor: 'if (handle.signal.aborted) throw handle.signal.reason;',
        replacement: '// mutant: no local check before the commit either',
      },
    ],
    run: (server, libDir) =>
      runTransaction(server, { libDir, rounds: 2, outlastRenewal: false, engine }),
    caughtAs: ['scenario'],
    accept: (v) => v.detail.includes('was committed'),
  };
}
