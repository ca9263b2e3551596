import type { LibraryMutant } from '../harness/library-mutant';
import { runGrantKills } from './grant-killed';
import { runLostWithdrawals } from './grant-lost-withdrawal';
import { runGrantPauses } from './grant-paused';

/** The confirmation of a grant in the attempt pipeline (`grantedToUs`). */
const confirmation = {
  file: 'store/attempt-pipeline.ts',
  anchor: '      : pendingGrantTo(reservation, request.reservationUse?.exceptGrant);',
};

export const grantMutants: LibraryMutant[] = [
  {
    name: 'a release hands the lock over without a new fence',
    patches: [
      {
        file: 'store/direct-grant.ts',
        anchor: '    fence: choose(NEXT_FENCE, otherwise.fence),',
        replacement: "    fence: otherwise.fence, // mutant: the grantee gets the releaser's fence",
      },
      {
        // Its placeholder names that fence too, as a grant's placeholder always names its own.
        file: 'store/direct-grant.ts',
        anchor: '    owner: choose(grantOwnerExpr(`${head}.k`), otherwise.owner),',
        replacement:
          "    owner: choose(grantTokenExpr(`${head}.k`, '$fence'), otherwise.owner), // mutant",
      },
    ],
    run: (server, libDir) =>
      runGrantKills(server, { libDir, victims: [], durationMs: 4000, name: 'gm_fence' }),
    caughtAs: ['fence-order'],
  },
  {
    name: 'a grant is confirmed by the holder id it names instead of its placeholder owner',
    patches: [
      {
        ...confirmation,
        // The grant names the grantee's process in `holder` (and `grantee`): matching that
        // instead of the placeholder lets a waiter take the key from its own process's holder.
        replacement:
          "      : { $and: [{ $eq: ['$holder', { $literal: holder }] }, EXCLUSIVE_LIVE] }; // mutant",
      },
    ],
    // Holds renewed past the lease, so a process's waiting head tries while its holder holds.
    run: (server, libDir) =>
      runGrantKills(server, {
        libDir,
        victims: [],
        durationMs: 5000,
        renewShare: 0.8,
        hold: { shortMaxMs: 200, longShare: 0.4, longMinMs: 1100, longMaxMs: 1600 },
        name: 'gm_holder',
      }),
    caughtAs: ['overlap'],
  },
  {
    name: 'a grant that ran out is still confirmed by its process',
    patches: [
      {
        ...confirmation,
        // mutant: ended grants too
        replacement:
          '      : { $and: pendingGrantTo(reservation).$and.filter((c) => c !== EXCLUSIVE_LIVE) };',
      },
    ],
    // Scenario 3's probe: a grantee frozen past its grant lease is thawed while the head of the
    // line (the quiet waiter) sleeps; two keys, one freeze.
    run: (server, libDir) =>
      runGrantPauses(server, {
        libDir,
        rounds: [['before-grant-quiet', 'before-grant-quiet']],
        name: 'gm_ended',
      }),
    caughtAs: ['scenario'],
    accept: (v) =>
      v.detail.includes('took the key first') || v.detail.includes('fence of the grant'),
  },
  {
    name: 'a grant heard on the stream is handed out whatever the queue does, its lease counted from the event',
    patches: [
      {
        file: 'waiting/key-queue.ts',
        anchor:
          '    if (this.attemptOnItsWay || this.transferring || this.anyAttemptUnanswered) return false;',
        replacement:
          '    if (this.transferring || this.anyAttemptUnanswered) return false; // mutant: attempts',
      },
      {
        file: 'waiting/key-queue.ts',
        anchor: '    if (performance.now() - last.sentAt > GRANT_LEASE_MS / 2) return false;',
        replacement: '    // mutant: no bound on the age of the last attempt',
      },
      {
        file: 'waiting/key-queue.ts',
        anchor: '      sentAt: last.sentAt,',
        replacement: '      sentAt: performance.now(), // mutant: counted from the event',
      },
    ],
    // A grantee frozen past its grant lease hears the grant only when thawed (its timers,
    // fired first, have sent an attempt), when another process holds the key.
    run: (server, libDir) =>
      runGrantPauses(server, {
        libDir,
        rounds: [['before-grant', 'before-grant']],
        name: 'gm_handout',
      }),
    caughtAs: ['overlap', 'scenario'],
  },
  {
    name: 'a withdrawal that got no reply is not tried again',
    patches: [
      {
        // The retry loop of `LockStore.withdraw` (commit 14768c7): gives up after one try.
        file: 'store/lock-store.ts',
        anchor: 'if (this.closing || !worthIt) return;',
        replacement: 'return; // mutant: a withdrawal MongoDB did not answer is lost',
      },
    ],
    // Scenario 5, one round: the leaver's withdrawal fails twice (the driver's retry too) and
    // is lost; the holder's release grants the leaver's stale place, the waiter waits it out.
    run: (server, libDir) =>
      runLostWithdrawals(server, {
        libDir,
        rounds: [{ times: 2, release: 'after-withdrawal' }],
        name: 'gm_withdraw',
      }),
    caughtAs: ['scenario'],
    accept: (v) => v.detail.startsWith('the waiter'),
  },
];
