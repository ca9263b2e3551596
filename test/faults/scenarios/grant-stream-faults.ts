import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { FaultServer } from '../../support/fault-server';
import {
  checkContention,
  countByKind,
  expectAllReported,
  settleWithin,
  sumStats,
} from '../harness/contend-checks';
import { FaultRun } from '../harness/fault-run';
import { orphanBoundMs } from '../history/orphans';
import {
  asKeyStates,
  GRANT_LEASE_MS,
  GrantSampler,
  grantsSeen,
  SAMPLE_SLACK_MS,
  type SeenGrant,
  type GrantScenario,
} from './grant-run';
import type { ModeMixEntry } from './modes-protocol';
import { dumpHistory, findStalls, modes, randomBetween, reports, waitSpans } from './modes-run';
import { Expectations, sleep, type ScenarioOutcome } from './scenario';

const key = 'gs';
/**
 * Long leases, short holds, unrenewed: a waiter's own timer (the lease it saw) rarely wakes it,
 * so what wakes a grantee is its change stream (or, after a failure, the feed's re-check).
 */
const ttlMs = 5000;
const timeoutMs = 12_000;
const mix: ModeMixEntry[] = [
  {
    mode: 'exclusive',
    share: 1,
    hold: { shortMaxMs: 200, longShare: 0, longMinMs: 0, longMaxMs: 0 },
  },
];
/** Every process's getMores fail together: they share this appName. */
const appName = 'grantStreams';
const polling = { changeStreams: 'off', pollIntervalMs: 25, maxPollIntervalMs: 100 };
/** How long each fault stays on (`alwaysOn`). */
const faultMs = 1500;
/**
 * A grant is confirmed this soon after it was written, or after the fault it was written in
 * ended: the grantee's stream resumes (and delivers it) or is reopened (and every waiter looks
 * again). Under the 5 s safety poll and the grant lease, so only the feed's recovery meets it.
 */
const confirmBoundMs = 2500;
/** Longest the key may stay free while callers wait, away from faults. */
const stallBoundMs = 1000;

interface StreamFault {
  name: string;
  /** The commands failed; `getMore` unless said otherwise. */
  commands?: string[];
  data: Record<string, unknown>;
}

const nonResumable: StreamFault = {
  name: 'non-resumable',
  data: { errorCode: 2, errorLabels: [] },
};

/**
 * In turn. The non-resumable faults come every other time: the driver gets past the other two
 * by resuming (its `aggregate` is not failed), so grants written during them are heard at once.
 * The library reopens a failed stream after a growing delay (50 ms to 1 s): a grant written late
 * in a non-resumable fault is heard only after it ended, and with the reopening failed too, any
 * grant written in it (the probe below; without it, whether a grant falls late in a fault was
 * chance, and a CI run once had none).
 */
const faults: StreamFault[] = [
  // The driver gives up on the stream, and the library's change feed cannot reopen it.
  { ...nonResumable, name: 'non-resumable, reopening failing', commands: ['getMore', 'aggregate'] },
  // The driver resumes the stream by itself, again and again, while the fail point is on.
  {
    name: 'resumable',
    data: { errorCode: 91, errorLabels: ['ResumableChangeStreamError'] },
  },
  // The driver gives up on the stream: the library's change feed reopens it.
  nonResumable,
  // The stream's connection is closed under it.
  { name: 'connection closed', data: { closeConnection: true } },
];

interface Window {
  fault: string;
  from: number;
  to: number;
}

/**
 * Change-stream faults during grants: 2 processes (1 worker each: no local transfers, every
 * hand-over between them is a grant) wait on their change streams and a third polls (1 worker:
 * its reservation names no process, so a release with it at the head frees the key instead of
 * granting it), all on one key with 5 s leases and short holds. Every 0.6 to 1.2 s every
 * process's getMore fails for 1.5 s (a non-resumable error with the stream's reopening failing
 * too, a resumable error, a non-resumable error, the connection closed, in turn), so that
 * releases grant the key to processes that cannot hear it.
 * Checked: the checker; every grant is confirmed within 2.5 s of being written, or of the end of
 * the fault it was written in (none runs out unconfirmed); away from faults the key is never
 * free for more than 1 s while callers wait; no worker error, every acquisition settled within
 * its timeout; no orphaned lease; grants were written during faults (the probe hit).
 */
export async function runGrantStreamFaults(
  server: FaultServer,
  options: { libDir?: string; durationMs?: number; name: string },
): Promise<ScenarioOutcome> {
  const run = new FaultRun(server, options.name);
  const expect = new Expectations();
  let sampler: GrantSampler | undefined;
  try {
    const uri = run.uriFor(appName);
    const spawnedFrom = sharedClockMs();
    const workers = await run.spawn([
      { label: 's0', uri, libDir: options.libDir },
      { label: 's1', uri, libDir: options.libDir },
      { label: 'poller', uri, libDir: options.libDir, options: polling },
    ]);
    const spawnMs = sharedClockMs() - spawnedFrom;
    run.sampleLeases({ boundMs: orphanBoundMs(5000) });
    sampler = new GrantSampler(run, key);
    const stopAt = sharedClockMs() + (options.durationMs ?? 10_000);
    const calls = workers.map((w) =>
      settleWithin(
        modes(w).call('contendModes', {
          key,
          workers: 1,
          ttlMs,
          timeoutMs,
          mix,
          stopAt,
          maxSections: 2000,
          gapMaxMs: 30,
        }),
        stopAt + timeoutMs + 5000,
      ),
    );

    const windows: Window[] = [];
    for (let i = 0; sharedClockMs() < stopAt - faultMs - 1000; i++) {
      await sleep(randomBetween(600, 1200));
      const fault = faults[i % faults.length];
      const from = sharedClockMs();
      await run.failPoint('alwaysOn', {
        failCommands: fault.commands ?? ['getMore'],
        appName,
        ...fault.data,
      });
      try {
        await sleep(faultMs);
      } finally {
        await run.failPoint('off');
      }
      windows.push({ fault: fault.name, from, to: sharedClockMs() });
    }

    const results = await Promise.all(calls);
    const stats = checkContention(run, workers, results, expect, {
      timeoutMs,
      settleBoundMs: 2000,
    });
    const sections = reports(run);
    expectAllReported(stats, workers.length, sections.length, expect);
    // A grant written last runs out (or is confirmed) before the samples stop.
    await sleep(500);
    const samples = await sampler.stop();
    const grants = grantsSeen(samples);
    const windowOf = (g: SeenGrant) =>
      windows.find((w) => g.firstSeen >= w.from - SAMPLE_SLACK_MS && g.firstSeen <= w.to);
    const duringFaults = grants.filter((g) => windowOf(g) !== undefined);
    let latest = 0;
    for (const grant of grants) {
      const window = windowOf(grant);
      const from = Math.max(grant.firstSeen, window?.to ?? 0);
      if (grant.confirmedAt === null) {
        // Passed on (its process left) or freed: short. Run out: nobody woke the grantee.
        const unconfirmedMs = grant.lastUnconfirmed - grant.firstSeen;
        expect.that(
          unconfirmedMs < GRANT_LEASE_MS - 2 * SAMPLE_SLACK_MS,
          key,
          `the grant to ${grant.grantee} (fence ${grant.fence}) was seen unconfirmed for ` +
            `${Math.round(unconfirmedMs)} ms${window ? ` (written during the ${window.fault} fault)` : ''}: ` +
            'the grantee never heard of it',
        );
        continue;
      }
      const lateMs = grant.confirmedAt - from;
      latest = Math.max(latest, lateMs);
      expect.that(
        lateMs <= confirmBoundMs,
        key,
        `the grant to ${grant.grantee} (fence ${grant.fence}) was confirmed ${Math.round(lateMs)} ms ` +
          `after ${window ? `the ${window.fault} fault it was written in ended` : 'it was written'} ` +
          `(bound ${confirmBoundMs} ms)`,
      );
    }
    // Written during a fault and confirmed only after it: the grantee had to recover to hear it.
    const heldBack = duringFaults.filter(
      (g) => g.confirmedAt !== null && g.confirmedAt > (windowOf(g)?.to ?? Infinity),
    );
    expect.that(
      heldBack.length >= 1,
      key,
      `no grant written during a fault waited for its end (${duringFaults.length} written ` +
        'during faults): the faults probed nothing',
    );
    const failedCalls = stats.flatMap((s) => s.failedCalls ?? []);
    const excused = windows.map((w) => ({ from: w.from, to: w.to + confirmBoundMs }));
    const stalls = findStalls(
      key,
      asKeyStates(samples),
      waitSpans(sections, failedCalls),
      stallBoundMs,
      excused,
    );
    const violations = await run.check({ leaseMs: ttlMs }, [...expect.violations, ...stalls]);
    dumpHistory(run, { windows, stats, grants });
    return {
      operations: sections.length,
      violations,
      notes:
        `${workers.length} processes started in ${Math.round(spawnMs)} ms; ` +
        `${sections.length} sections, ${grants.length} grants (${duringFaults.length} during ` +
        `${windows.length} faults: ${[...new Set(windows.map((w) => w.fault))].join(', ')}; ` +
        `${heldBack.length} confirmed only after their fault ended), ` +
        `slowest confirmation ${Math.round(latest)} ms after its grant or fault; ` +
        `${sumStats(stats, 'timeouts')} timeouts; ${run.leaseSamplingNotes()}; ` +
        `violations: ${countByKind(violations)}`,
    };
  } finally {
    await run.failPoint('off').catch(() => undefined);
    await sampler?.stop();
    await run.stop();
  }
}

export const grantStreamFaults: GrantScenario = {
  name: '4. change-stream faults during grants (getMore failing, connections closed)',
  run: (server: FaultServer, libDir?: string) =>
    runGrantStreamFaults(server, { libDir, name: 'grant_stream' }),
};
