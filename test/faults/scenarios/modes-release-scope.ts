import type { FaultServer } from '../../support/fault-server';
import { countByKind } from '../harness/contend-checks';
import { FaultRun, type StartedWorker } from '../harness/fault-run';
import type { Revocation } from '../history/modes-checker';
import type { ModeOptions, ModeSectionOutcome } from './modes-protocol';
import { checkModes, dumpHistory, modes, reports, waitFor } from './modes-run';
import { Expectations, sleep, type Scenario, type ScenarioOutcome } from './scenario';

const lockKey = 'rs:lock';
const semKey = 'rs:sem';
const permits = 3;
/** Short and renewed: holders renew every third of it, so they hear of a revocation soon. */
const ttlMs = 1000;
const renewalIntervalMs = ttlMs / 3;
/** A revoked holder elsewhere is told at its next renewal: one interval, a round trip, slack. */
const noticeMs = Math.round(renewalIntervalMs + 400);
/**
 * How soon after `releaseScope` settled its waiters must have the keys (they wake on its write).
 */
const wakeBoundMs = 1500;
const waitMs = 3000;
const holdMs = 3000;
const controlHoldMs = 2000;
/** A holder frozen over the call, thawed before its lease could run out. */
const pauseMs = 400;

export interface ReleaseScopeOptions {
  libDir?: string;
  /** Rounds, each with its own scope and a caller in another process. Default 3. */
  rounds?: number;
}

interface Call {
  what: string;
  key: string;
  result: Promise<ModeSectionOutcome>;
}

/**
 * `releaseScope` called from another process than the holders'. Per round (scope
 * `tenant:<round>`, the caller one of 4 processes in turn, the others hold): three shared
 * holders of `rs:lock` and two 1-permit holders of the 3-permit semaphore `rs:sem` in that
 * scope, a third permit holder in another scope (kept), all renewed (1000 ms leases); the caller
 * waits for `rs:lock` exclusively and for 2 permits, then revokes the scope. Every other round
 * one holder's process is frozen over the call (thawed within its lease). Checked: the call
 * counts the 5 live leases it released; each revoked holder is told (signal) by its next
 * renewal (after its thaw, if frozen); the other scope's holder keeps its permit; both waiters
 * get the keys soon after the call; and the mode checker, with the call as the documented end
 * of the revoked leases.
 */
export async function runReleaseScope(
  server: FaultServer,
  options: ReleaseScopeOptions = {},
): Promise<ScenarioOutcome> {
  const run = new FaultRun(server, 'modes_scope');
  const expect = new Expectations();
  const revocations: Revocation[] = [];
  const notes: string[] = [];
  try {
    const workers = await run.spawn(
      Array.from({ length: 4 }, (_, i) => ({ label: `c${i}`, libDir: options.libDir })),
    );
    const rounds = options.rounds ?? 3;
    for (let round = 0; round < rounds; round++) {
      const scope = `tenant:${round}`;
      const caller = workers[round % workers.length];
      const holders = workers.filter((w) => w !== caller);
      const section = (
        worker: StartedWorker,
        what: string,
        key: string,
        mode: ModeOptions,
        extra: { holdMs: number; timeoutMs?: number; renew?: boolean },
      ): Call => ({
        what: `${worker.label}:${what}`,
        key,
        result: modes(worker).call('modeSection', {
          key,
          ttlMs,
          timeoutMs: extra.timeoutMs ?? 3000,
          renew: extra.renew ?? true,
          holdMs: extra.holdMs,
          name: `${what}${round}`,
          ...mode,
        }),
      });
      const revoked: Call[] = [
        ...holders.map((w) => section(w, 'reader', lockKey, { mode: 'shared', scope }, { holdMs })),
        ...holders
          .slice(0, 2)
          .map((w) => section(w, 'permit', semKey, { permits, weight: 1, scope }, { holdMs })),
      ];
      const kept = section(
        holders[2],
        'kept',
        semKey,
        { permits, weight: 1, scope: `other:${round}` },
        { holdMs: controlHoldMs },
      );
      const held = await waitFor(() => {
        const open = reports(run).filter(
          (s) => s.outcome === 'open' && s.worker.endsWith(`${round}`),
        );
        return open.length === revoked.length + 1 ? open : undefined;
      }, 5000);
      if (!held) {
        const failed = await Promise.race([settle([...revoked, kept]), sleep(1000).then(() => [])]);
        expect.that(
          false,
          '*',
          `round ${round}: the holders were not all granted within 5 s` +
            failed.map((f) => `; ${f.what}: ${describe(f.outcome)}`).join(''),
        );
        break;
      }
      const waiters = [
        section(caller, 'writer', lockKey, {}, { holdMs: 50, timeoutMs: waitMs, renew: false }),
        section(
          caller,
          'wide',
          semKey,
          { permits, weight: 2 },
          { holdMs: 50, timeoutMs: waitMs, renew: false },
        ),
      ];
      await sleep(300); // the waiters are queued (and reserved) by now
      const frozen = round % 2 === 1 ? holders[0] : undefined;
      if (frozen) {
        run.pause(frozen);
        await sleep(100);
      }
      const call = await modes(caller).call('releaseScope', { scope });
      revocations.push({ scope, calledAt: call.calledAt, settledAt: call.settledAt });
      if (frozen) {
        await sleep(Math.max(0, pauseMs - 100 - (call.settledAt - call.calledAt)));
        run.resume(frozen);
      }
      expect.that(
        call.released === revoked.length,
        scope,
        `releaseScope counted ${call.released} leases, ${revoked.length} were live`,
      );
      for (const w of await settle(waiters)) {
        if (!w.outcome.ok) {
          expect.that(false, w.key, `${w.what} got no lock: ${w.outcome.message}`);
          continue;
        }
        const late = w.outcome.start - call.settledAt;
        expect.that(
          w.outcome.start >= call.calledAt && late <= wakeBoundMs,
          w.key,
          `${w.what} was granted ${Math.round(late)} ms after releaseScope settled ` +
            `(bound ${wakeBoundMs} ms)`,
        );
        notes.push(`${Math.round(late)}`);
      }
      for (const r of await settle(revoked)) {
        expect.that(
          r.outcome.ok && r.outcome.outcome === 'lost' && r.outcome.signalAt !== null,
          r.key,
          `${r.what} of scope ${scope} ended ${describe(r.outcome)}, not told of its loss`,
        );
      }
      const [control] = await settle([kept]);
      expect.that(
        control.outcome.ok && control.outcome.outcome === 'released',
        semKey,
        `${control.what} of another scope ended ${describe(control.outcome)}`,
      );
    }
    const violations = await checkModes(
      run,
      { leaseMs: ttlMs, revocations, revocationNoticeMs: noticeMs },
      expect.violations,
    );
    dumpHistory(run, { revocations });
    return {
      operations: run.history.sections.length,
      violations,
      notes:
        `${revocations.length} scopes revoked; waiters granted ${notes.join(', ')} ms after ` +
        `the call; violations: ${countByKind(violations)}`,
    };
  } finally {
    await run.stop();
  }
}

async function settle(
  calls: Call[],
): Promise<{ what: string; key: string; outcome: ModeSectionOutcome }[]> {
  return Promise.all(
    calls.map(async (c) => ({
      what: c.what,
      key: c.key,
      outcome: await c.result.catch((error: unknown): ModeSectionOutcome => ({
        ok: false,
        errorName: 'worker',
        message: String(error),
        calledAt: 0,
        settledAt: 0,
      })),
    })),
  );
}

function describe(outcome: ModeSectionOutcome): string {
  return outcome.ok
    ? `${outcome.outcome}${outcome.signalAt === null ? ', its signal never aborted' : ''}`
    : `without a lock (${outcome.message})`;
}

export const modesReleaseScope: Scenario = {
  name: 'c. releaseScope from another process: shared and permit holders told at their next renewal',
  run: (server) => runReleaseScope(server),
};
