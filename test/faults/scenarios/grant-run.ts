import type { ChangeStream, Document } from 'mongodb';
import { GRANT_LEASE_MS } from '../../../lib/store/direct-grant';
import { RESERVATION_TTL_MS } from '../../../lib/store/lock-modes';
import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import { lockCollection, type FaultRun } from '../harness/fault-run';
import type { FaultServer } from '../../support/fault-server';
import type { DeadInstance, Violation } from '../history/history';
import type { KeyStateSample } from './modes-run';
import { sleep, type ScenarioOutcome } from './scenario';

// Parent-side helpers of the direct-grant scenarios (`grant-*.ts`): what the lock document says
// about grants (a sampler), when a grant is written (a change stream of the parent's own), and
// the bounds the scenarios check. See README.md, "Direct grant".

export { GRANT_LEASE_MS, RESERVATION_TTL_MS };

/**
 * A grant scenario: `libDir` is the library copy its workers load (the spec runs the library
 * under test from a snapshot taken when it starts, and the mutants from patched copies).
 */
export interface GrantScenario {
  name: string;
  run(server: FaultServer, libDir?: string): Promise<ScenarioOutcome>;
}

/** Owner token of a grant (`direct-grant.ts`'s `grantToken`): unconfirmed while `grantedTo` is set. */
export const GRANT_OWNER_PREFIX = 'grant:';

/**
 * Slack on a stretch measured from samples: the sampling interval on each side, the server's
 * `$$NOW` against the shared clock, and a loaded machine's late reads.
 */
export const SAMPLE_SLACK_MS = 600;

/**
 * How long after its death a killed process's reservation may still be granted the lock (it was
 * refreshed just before), and that grant live: the checker's margin for a lock held by the dead.
 */
export const DEAD_GRANT_MARGIN_MS = RESERVATION_TTL_MS + GRANT_LEASE_MS + 1000;

/** One read of a key's lock document: the exclusive lease, the grant marks, the line. */
export interface GrantSample {
  /** Shared clock, midway between sending the read and its answer. */
  at: number;
  owner: string | null;
  holder: string | null;
  fence: string | null;
  /** Remaining exclusive lease by the server clock (negative once ended). */
  remainingMs: number;
  /** An owner and a lease not yet ended. */
  live: boolean;
  /** Live, the owner a grant's placeholder and `grantedTo` set: granted, not confirmed yet. */
  grant: boolean;
  grantee: string | null;
  /** Live reservations, oldest first (the head first). */
  reservations: { id: string; holder: string | null; ageMs: number; remainingMs: number }[];
}

/** The head of the line in a sample: the oldest live reservation, or undefined. */
export function headOf(
  sample: GrantSample | undefined,
): GrantSample['reservations'][number] | undefined {
  return sample?.reservations[0];
}

/**
 * Reads one key's lock document every `intervalMs` until stopped: the scenarios' view of the
 * server (grants, confirmations, who holds, the line), and what their bounds are checked on.
 */
export class GrantSampler {
  readonly samples: GrantSample[] = [];
  private stopped = false;
  private readonly loop: Promise<void>;

  constructor(
    private readonly run: FaultRun,
    private readonly key: string,
    private readonly intervalMs = 20,
  ) {
    this.loop = this.sample();
  }

  get latest(): GrantSample | undefined {
    return this.samples[this.samples.length - 1];
  }

  async stop(): Promise<GrantSample[]> {
    this.stopped = true;
    await this.loop;
    return this.samples;
  }

  /** Reads the key once, now (also while the sampler runs). */
  async read(): Promise<GrantSample | undefined> {
    const sentAt = sharedClockMs();
    const [doc] = await this.run.admin
      .db(this.run.dbName)
      .collection(lockCollection)
      .aggregate<Document>(
        [
          { $match: { _id: this.key } },
          {
            $project: {
              owner: 1,
              holder: 1,
              fence: 1,
              grantee: 1,
              grantedTo: 1,
              remainingMs: { $subtract: ['$expiresAt', '$$NOW'] },
              waiting: {
                $map: {
                  input: {
                    $filter: {
                      input: { $objectToArray: { $ifNull: ['$waiting', {}] } },
                      cond: { $gt: ['$$this.v.expiresAt', '$$NOW'] },
                    },
                  },
                  in: {
                    id: '$$this.k',
                    holder: { $ifNull: ['$$this.v.holder', null] },
                    ageMs: { $subtract: ['$$NOW', '$$this.v.since'] },
                    remainingMs: { $subtract: ['$$this.v.expiresAt', '$$NOW'] },
                  },
                },
              },
            },
          },
        ],
        { maxTimeMS: 1000 },
      )
      .toArray()
      .catch(() => [] as Document[]);
    if (!doc) return undefined;
    const owner = (doc.owner as string | null | undefined) ?? null;
    const remainingMs = Number(doc.remainingMs ?? -1);
    const live = owner !== null && remainingMs > 0;
    type Reservation = GrantSample['reservations'][number];
    const reservations = ((doc.waiting as Reservation[] | undefined) ?? [])
      .map((r) => ({
        id: String(r.id),
        holder: r.holder ?? null,
        ageMs: Number(r.ageMs),
        remainingMs: Number(r.remainingMs),
      }))
      .sort((a, b) => b.ageMs - a.ageMs || a.id.localeCompare(b.id));
    return {
      at: (sentAt + sharedClockMs()) / 2,
      owner,
      holder: (doc.holder as string | null | undefined) ?? null,
      fence: doc.fence == null ? null : String(doc.fence),
      remainingMs,
      live,
      // A grant handed out on its event keeps the placeholder as its owner; its confirmation
      // clears `grantedTo`.
      grant: live && owner.startsWith(GRANT_OWNER_PREFIX) && doc.grantedTo != null,
      grantee: (doc.grantee as string | null | undefined) ?? null,
      reservations,
    };
  }

  private async sample(): Promise<void> {
    while (!this.stopped) {
      const startedAt = sharedClockMs();
      const sample = await this.read();
      if (sample) this.samples.push(sample);
      await sleep(Math.max(2, startedAt + this.intervalMs - sharedClockMs()));
    }
  }
}

/** The samples as `modes-run.ts`'s `findStalls` reads them (an exclusive lease or none). */
export function asKeyStates(samples: GrantSample[]): KeyStateSample[] {
  return samples.map((s) => ({
    at: s.at,
    exclusive: s.live
      ? { holder: s.holder, fence: s.fence ?? '', remainingMs: s.remainingMs }
      : null,
    entries: [],
    reservations: s.reservations.map((r) => ({
      id: r.id,
      weight: 1000,
      ageMs: r.ageMs,
      remainingMs: r.remainingMs,
    })),
  }));
}

/** One grant as the samples saw it: a fence first seen with a grant's placeholder owner. */
export interface SeenGrant {
  fence: string;
  grantee: string | null;
  firstSeen: number;
  /** Last sample still showing it unconfirmed. */
  lastUnconfirmed: number;
  /** First live sample with the same fence and no grant marks: confirmed. */
  confirmedAt: number | null;
}

export function grantsSeen(samples: GrantSample[]): SeenGrant[] {
  const grants = new Map<string, SeenGrant>();
  for (const s of samples) {
    if (s.fence === null) continue;
    const seen = grants.get(s.fence);
    if (s.grant) {
      if (!seen) {
        grants.set(s.fence, {
          fence: s.fence,
          grantee: s.holder,
          firstSeen: s.at,
          lastUnconfirmed: s.at,
          confirmedAt: null,
        });
      } else seen.lastUnconfirmed = s.at;
    } else if (seen && s.live && seen.confirmedAt === null) {
      seen.confirmedAt = s.at;
    }
  }
  return [...grants.values()];
}

/** A stretch of samples in which the key was held (granted or leased) by a process already dead. */
export interface DeadHold {
  holder: string;
  fence: string;
  /** Samples in the stretch showed the grant's placeholder (never confirmed). */
  grant: boolean;
  from: number;
  to: number;
}

export function deadHolds(samples: GrantSample[], deaths: DeadInstance[]): DeadHold[] {
  const diedAt = new Map(deaths.map((d) => [d.holder, d.diedAt]));
  const holds: DeadHold[] = [];
  let open: DeadHold | undefined;
  for (const s of samples) {
    const death = s.holder === null ? undefined : diedAt.get(s.holder);
    const dead = s.live && death !== undefined && s.at > death;
    if (dead && open && open.fence === s.fence) {
      open.to = s.at;
      open.grant ||= s.grant;
      continue;
    }
    if (open) holds.push(open);
    open = dead
      ? { holder: s.holder as string, fence: s.fence ?? '', grant: s.grant, from: s.at, to: s.at }
      : undefined;
  }
  if (open) holds.push(open);
  return holds;
}

/**
 * The bounds a dead process may cost the others: each lease or grant it holds lasts at most
 * `leaseMs` (a grant: `GRANT_LEASE_MS`), and it is granted the lock only while its reservation
 * lives, at most `RESERVATION_TTL_MS` after its death.
 */
export function checkDeadHolds(
  key: string,
  holds: DeadHold[],
  deaths: DeadInstance[],
  leaseMs: number,
): Violation[] {
  const violations: Violation[] = [];
  const diedAt = new Map(deaths.map((d) => [d.holder, d.diedAt]));
  for (const hold of holds) {
    const longest = hold.grant ? GRANT_LEASE_MS : Math.max(leaseMs, GRANT_LEASE_MS);
    if (hold.to - hold.from > longest + SAMPLE_SLACK_MS) {
      violations.push({
        kind: 'scenario',
        key,
        detail:
          `the dead process ${hold.holder} held the key (fence ${hold.fence}, ` +
          `${hold.grant ? 'an unconfirmed grant' : 'a lease'}) for ${Math.round(hold.to - hold.from)} ms ` +
          `(bound ${longest} + ${SAMPLE_SLACK_MS} ms)`,
      });
    }
    const death = diedAt.get(hold.holder) ?? Number.NaN;
    if (hold.grant && hold.from > death + RESERVATION_TTL_MS + SAMPLE_SLACK_MS) {
      violations.push({
        kind: 'scenario',
        key,
        detail:
          `the dead process ${hold.holder} was granted the key (fence ${hold.fence}) ` +
          `${Math.round(hold.from - death)} ms after its death: its reservation ` +
          `(${RESERVATION_TTL_MS} ms) had run out`,
      });
    }
  }
  return violations;
}

/** A grant written to the lock collection, as the parent's change stream reported it. */
export interface GrantEvent {
  key: string;
  /** The granted process's holder id. */
  grantee: string;
  fence: string | null;
  /** When the parent heard of it, on the shared clock. */
  heardAt: number;
}

/**
 * The parent's own change stream on the scenario's lock collection, filtered as a grantee's
 * process filters it (`updatedFields.grantee`), but for every grantee: the parent freezes or
 * kills a grantee as soon as it hears of its grant, racing the grantee's own confirmation.
 */
export class GrantWatcher {
  readonly events: GrantEvent[] = [];
  private readonly stream: ChangeStream;
  private closed = false;
  private loop: Promise<void> | undefined;

  constructor(run: FaultRun) {
    this.stream = run.admin
      .db(run.dbName)
      .collection(lockCollection)
      .watch(
        [
          {
            $match: {
              operationType: 'update',
              'updateDescription.updatedFields.grantee': { $type: 'string' },
            },
          },
        ],
        { maxAwaitTimeMS: 100 },
      );
  }

  /** Opens the stream (its first getMore answered) and starts reading it. */
  async start(): Promise<void> {
    const first = await this.stream.tryNext();
    if (first) this.record(first);
    this.loop = this.pump();
  }

  /** The first grant (from `since` on) that `accept` takes, waiting up to `timeoutMs`. */
  async next(
    accept: (event: GrantEvent) => boolean,
    since: number,
    timeoutMs: number,
  ): Promise<GrantEvent | null> {
    const until = sharedClockMs() + timeoutMs;
    for (;;) {
      const found = this.events.find((e) => e.heardAt >= since && accept(e));
      if (found) return found;
      if (sharedClockMs() >= until) return null;
      await sleep(1);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.stream.close().catch(() => undefined);
    await this.loop?.catch(() => undefined);
  }

  private async pump(): Promise<void> {
    while (!this.closed) {
      try {
        const change = await this.stream.tryNext();
        if (change) this.record(change);
      } catch {
        if (this.closed) return;
        await sleep(20);
      }
    }
  }

  private record(change: Document): void {
    const updated = (change.updateDescription?.updatedFields ?? {}) as Document;
    this.events.push({
      key: String(change.documentKey?._id),
      grantee: String(updated.grantee),
      fence: updated.fence == null ? null : String(updated.fence),
      heardAt: sharedClockMs(),
    });
  }
}

/** Waits until `probe` gives a value, looking every `everyMs`; `null` after `timeoutMs`. */
export async function poll<T>(
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs: number,
  everyMs = 5,
): Promise<T | null> {
  const until = sharedClockMs() + timeoutMs;
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (sharedClockMs() >= until) return null;
    await sleep(everyMs);
  }
}
