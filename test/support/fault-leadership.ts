import { MongoClient } from 'mongodb';
import type { Subscription } from 'rxjs';
import type { LeaderTerm, Leadership, LockHandle, LockService } from '../../lib';
import type { SectionRecord } from '../faults/history/history';
import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import { sharedDeadline } from './fault-contention';
import { FencedResource } from './fault-fenced-resource';

// Worker side of the leadership fault suite (`test/faults/leadership.fault-spec.ts`): runs
// inside `fault-worker.ts`, which serves these handlers beside its own. Only types come from
// `lib` here: the leadership is the worker's service's own.

/**
 * A deliberately broken leader, to show that the suite catches it (never a change to `lib`):
 * - `ignore-signal`: does not look at `term.signal`; it works, and counts its term as on,
 *   until it resigns (its protected interval runs to the resignation);
 * - `interval-to-release`: records its interval as running to the moment it handled the end
 *   of its term (its release), not to its own local lease deadline.
 */
export type LeadMutant = 'ignore-signal' | 'interval-to-release';

export interface LeadArgs {
  /** The leadership's name. */
  name: string;
  /** Its lock key (`LEADER_KEY_PREFIX + name`): the history's key. */
  key: string;
  ttlMs: number;
  /** A tick of protected work (one fenced write) every `tickMs` while leading. */
  tickMs: number;
  mutant?: LeadMutant;
}

/** One term as its leader saw it; times on the shared clock. */
export interface LeadTermReport {
  fence: string;
  /** When `terms$` emitted it. */
  start: number;
  /** When its work stopped (the signal aborted, or it resigned); `null` while on. */
  end: number | null;
  signalAt: number | null;
  /** Its local lease deadline, at the abort or just before resigning. */
  deadline: number | null;
  outcome: SectionRecord['outcome'];
  /** When each tick of protected work began (the last 200). */
  tickTimes: number[];
  ticks: number;
  /** Ticks begun although the signal had aborted (only a mutant). */
  ticksAfterSignal: number;
  /**
   * Ticks begun with the signal not aborted although the term's local deadline
   * (`handle.expiresAt`) had passed: the signal is a timer, and a thawed process may run
   * another due timer first.
   */
  ticksPastDeadline: number;
  /** Fenced writes the resource refused (a later term had written). */
  refusedWrites: number;
  /** Fenced writes that failed (the server could not be reached). */
  failedWrites: number;
}

export type LeadershipWorkerOps = {
  /** Subscribes to `leadership(name, { ttlMs }).terms$`; each term is recorded and worked. */
  lead: [LeadArgs, { subscribedAt: number }];
  leadStatus: [{ name: string }, { isLeader: boolean; terms: LeadTermReport[] }];
  /** Resigns the current term (`term.resign()`); `terms$` stays subscribed (back in line). */
  resignTerm: [{ name: string }, { resignedAt: number | null }];
  /** Unsubscribes (which resigns) and waits for the resignation. */
  stopLead: [{ name: string }, { stoppedAt: number; terms: LeadTermReport[] }];
};

export interface LeadershipWorkerDeps {
  service(): LockService;
  label(): string;
  /** `StartArgs.uri` (its `appName` is the worker's label) and `dbName`. */
  uri(): string;
  dbName(): string;
  report(section: SectionRecord): void;
}

type Handlers = {
  [K in keyof LeadershipWorkerOps]: (
    args: LeadershipWorkerOps[K][0],
  ) => Promise<LeadershipWorkerOps[K][1]>;
};

interface TermState {
  term: LeaderTerm;
  handle: Pick<LockHandle, 'expiresAt'>;
  report: LeadTermReport;
  /** Set just before this worker resigns: the abort that follows is not a loss. */
  resigning: boolean;
  finish(outcome: 'released' | 'lost', end: number, deadline: number | null): void;
}

interface Campaign {
  args: LeadArgs;
  leadership: Leadership;
  subscription: Subscription;
  terms: TermState[];
}

/** A term's local lease deadline (`expiresAt`) is what the history checker cuts its interval at. */
function termHandle(term: LeaderTerm): Pick<LockHandle, 'expiresAt'> {
  return term;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function leadershipHandlers(deps: LeadershipWorkerDeps): Handlers {
  const campaigns = new Map<string, Campaign>();
  let resource: FencedResource | undefined;
  let resourceClient: MongoClient | undefined;

  /** Fenced writes go through a client of their own: fail points aimed at the worker's appName spare them. */
  function fencedResource(): FencedResource {
    if (resource) return resource;
    const uri = deps
      .uri()
      .replace(/appName=[^&]*/, `appName=${encodeURIComponent(`${deps.label()}-resource`)}`);
    resourceClient = new MongoClient(uri);
    resource = new FencedResource(resourceClient.db(deps.dbName()));
    return resource;
  }

  function requireCampaign(name: string): Campaign {
    const campaign = campaigns.get(name);
    if (!campaign) throw new Error(`${deps.label()} does not lead ${name}`);
    return campaign;
  }

  function section(args: LeadArgs, report: LeadTermReport): SectionRecord {
    const service = deps.service();
    return {
      key: args.key,
      fence: report.fence,
      holder: service.holderId,
      worker: `${deps.label()}:lead`,
      pid: process.pid,
      start: report.start,
      end: report.end,
      outcome: report.outcome,
      deadline: report.deadline,
      signalAt: report.signalAt,
    };
  }

  function runTerm(campaign: Campaign, term: LeaderTerm): void {
    const { args } = campaign;
    const handle = termHandle(term);
    const report: LeadTermReport = {
      fence: term.fence.toString(),
      start: sharedClockMs(),
      end: null,
      signalAt: null,
      deadline: null,
      outcome: 'open',
      tickTimes: [],
      ticks: 0,
      ticksAfterSignal: 0,
      ticksPastDeadline: 0,
      refusedWrites: 0,
      failedWrites: 0,
    };
    const state: TermState = {
      term,
      handle,
      report,
      resigning: false,
      finish(outcome, end, deadline) {
        if (report.outcome !== 'open') return;
        Object.assign(report, { outcome, end, deadline });
        deps.report(section(args, report));
      },
    };
    campaign.terms.push(state);
    // Open at once: a killed leader never reports again, and its term counts until its death.
    deps.report(section(args, report));

    const ignoreSignal = args.mutant === 'ignore-signal';
    if (!ignoreSignal) {
      const onAbort = () => {
        const at = sharedClockMs();
        report.signalAt = at;
        if (state.resigning) return;
        // Lost: work stopped now; the interval ends at the deadline it had when told, or (a
        // mutant) at the moment it handled the end and released.
        const deadline = args.mutant === 'interval-to-release' ? at : sharedDeadline(handle);
        state.finish('lost', at, deadline);
        void term.resign();
      };
      if (term.signal.aborted) onAbort();
      else term.signal.addEventListener('abort', onAbort, { once: true });
    }

    void (async () => {
      const resource = fencedResource();
      while (report.outcome === 'open') {
        await sleep(args.tickMs);
        if (report.outcome !== 'open') break;
        // A leader checks its signal before each piece of protected work (the mutant does not).
        if (!ignoreSignal && term.signal.aborted) break;
        const at = sharedClockMs();
        report.ticks += 1;
        report.tickTimes.push(at);
        if (report.tickTimes.length > 200) report.tickTimes.shift();
        if (term.signal.aborted) report.ticksAfterSignal += 1;
        else if (handle.expiresAt.getTime() <= Date.now()) report.ticksPastDeadline += 1;
        try {
          const accepted = await resource.write(args.key, term.fence, `${at}`, deps.label());
          if (!accepted) report.refusedWrites += 1;
        } catch {
          report.failedWrites += 1;
        }
      }
    })();
  }

  /** Ends this worker's terms still on, as resigned, before their resignation is sent. */
  function resignOpen(campaign: Campaign): TermState[] {
    const open = campaign.terms.filter((t) => t.report.outcome === 'open');
    for (const state of open) {
      state.resigning = true;
      const at = sharedClockMs();
      // Read just before the resignation is sent; the mutant never knew its deadline.
      const deadline =
        campaign.args.mutant === 'ignore-signal' ? null : sharedDeadline(state.handle);
      state.finish('released', at, deadline);
    }
    return open;
  }

  const reports = (campaign: Campaign) =>
    campaign.terms.map((t) => ({ ...t.report, tickTimes: [...t.report.tickTimes] }));

  return {
    async lead(args) {
      if (campaigns.has(args.name)) throw new Error(`${deps.label()} already leads ${args.name}`);
      const leadership = deps.service().leadership(args.name, { ttlMs: args.ttlMs });
      const campaign: Campaign = { args, leadership, terms: [], subscription: undefined! };
      campaigns.set(args.name, campaign);
      campaign.subscription = leadership.terms$.subscribe((term) => runTerm(campaign, term));
      return { subscribedAt: sharedClockMs() };
    },

    async leadStatus({ name }) {
      const campaign = requireCampaign(name);
      return { isLeader: campaign.leadership.isLeader, terms: reports(campaign) };
    },

    async resignTerm({ name }) {
      const campaign = requireCampaign(name);
      const open = resignOpen(campaign);
      if (open.length === 0) return { resignedAt: null };
      const resignedAt = sharedClockMs();
      await Promise.all(open.map((t) => t.term.resign()));
      return { resignedAt };
    },

    async stopLead({ name }) {
      const campaign = requireCampaign(name);
      const open = resignOpen(campaign);
      const stoppedAt = sharedClockMs();
      campaign.subscription.unsubscribe();
      await Promise.all(open.map((t) => t.term.resign()));
      await campaign.leadership.resign();
      campaigns.delete(name);
      if (campaigns.size === 0) {
        await resourceClient?.close();
        resourceClient = undefined;
        resource = undefined;
      }
      return { stoppedAt, terms: reports(campaign) };
    },
  };
}
