import type { ContendStats, HoldPlan } from '../../support/fault-protocol';
import type { ModeSection } from '../history/modes-checker';

/**
 * The worker operations the mode scenarios add to `test/support/fault-worker.ts` (served
 * beside its own, `WorkerOps`), over IPC as JSON. Worker side: `modes-worker.ts`.
 */

/**
 * How an acquisition holds its key: `LockService.acquire`'s `mode`, `permits`, `weight`, `scope`.
 */
export interface ModeOptions {
  mode?: 'exclusive' | 'shared';
  permits?: number;
  weight?: number;
  scope?: string;
}

/**
 * What a mode worker reports: the checker's {@link ModeSection}, plus what the parent needs to
 * aim its faults. Reported `open` as soon as `acquire` resolves, and again when it ends.
 */
export type ModeSectionReport = ModeSection & {
  renew?: boolean;
  /** How long the holder means to work, in ms. */
  plannedHoldMs?: number;
  /** The handle's local deadline just after the grant, on the shared clock. */
  leaseEndAtGrant?: number;
  /** Transactions: the marker document was written inside the transaction (`txSection`). */
  markerWritten?: boolean;
  /** Transactions: how many times `fn` has run so far (reported again at each run). */
  runs?: number;
};

/** One kind of acquisition in a contention mix, picked with probability `share` / total. */
export interface ModeMixEntry extends ModeOptions {
  share: number;
  /** Share of these acquisitions renewed while held. Default 0. */
  renewShare?: number;
  hold: HoldPlan;
}

/** `contendModes`: `workers` logical workers take `key` in the mix's modes until `stopAt`. */
export interface ModesContendArgs {
  key: string;
  workers: number;
  ttlMs: number;
  timeoutMs: number;
  mix: ModeMixEntry[];
  /** Stop starting sections at this time (shared clock) or after this many, whichever first. */
  stopAt: number;
  maxSections: number;
  /** Pause between two sections of one worker: random, up to this. Default 0. */
  gapMaxMs?: number;
}

/** `modeSection`: one acquisition held `holdMs` (less if its signal aborts), then released. */
export interface ModeSectionArgs extends ModeOptions {
  key: string;
  ttlMs: number;
  timeoutMs: number;
  renew: boolean;
  holdMs: number;
  /** Appended to the worker's label in the record, e.g. `holder` → `p0:holder`. */
  name: string;
}

export type ModeSectionOutcome =
  | {
      ok: true;
      outcome: 'released' | 'lost' | 'open';
      fence: string;
      start: number;
      signalAt: number | null;
      calledAt: number;
      settledAt: number;
    }
  | { ok: false; errorName: string; message: string; calledAt: number; settledAt: number };

/**
 * `txSection`: `withLock(key, fn, { transaction: true, mode, … })`, where `fn` inserts the
 * marker document `{ _id: markerId }` into `markerCollection` on the handle's session, then
 * works `workMs` (less if its signal aborts) or, with `spin`, reports `markerWritten` and
 * spins until its process was frozen and thawed (see `spinUntilThawed`). Never rejects.
 */
export interface TxSectionArgs extends ModeOptions {
  key: string;
  ttlMs: number;
  timeoutMs: number;
  workMs: number;
  spin: boolean;
  markerId: string;
  markerCollection: string;
  name: string;
}

export type TxSectionOutcome = {
  calledAt: number;
  settledAt: number;
  /** How many times `fn` ran (the driver runs it again after a transient transaction error). */
  runs: number;
  /** With `spin`: whether the spin saw the process frozen and thawed. */
  thawed: boolean;
} & ({ ok: true; result: string } | { ok: false; errorName: string; message: string });

export interface ReleaseScopeOutcome {
  released: number;
  calledAt: number;
  settledAt: number;
}

export type ModesWorkerOps = {
  contendModes: [ModesContendArgs, ContendStats];
  modeSection: [ModeSectionArgs, ModeSectionOutcome];
  txSection: [TxSectionArgs, TxSectionOutcome];
  /** `service.releaseScope(scope)`, with the shared-clock times of the call and its settling. */
  releaseScope: [{ scope: string }, ReleaseScopeOutcome];
};
