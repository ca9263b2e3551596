import type { LibraryMutant } from '../harness/library-mutant';
import { runTransaction } from './modes-transaction';

export const modesMutants: LibraryMutant[] = [unprovenCommit()];

/** A transaction that commits with no proof that its lock is still held. */
function unprovenCommit(): LibraryMutant {
  return {
    name: 'a transaction commits without proving its lock is still held',
    patches: [
      {
        file: 'lock-transaction.ts',
        anchor: 'if (!(await store.confirmHeldIn(held, session))) {',
        replacement: 'if (!(await store.confirmHeldIn(held, session)) && false) {',
      },
      {
        file: 'lock-transaction.ts',
        anchor: 'if (handle.signal.aborted) throw handle.signal.reason;',
        replacement: '// mutant: no local check before the commit either',
      },
    ],
    run: (server, libDir) => runTransaction(server, { libDir, rounds: 2, outlastRenewal: false }),
    caughtAs: ['scenario'],
    accept: (v) => v.detail.includes('was committed'),
  };
}
