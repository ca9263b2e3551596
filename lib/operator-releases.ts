import type { ForceReleaseOptions } from './interfaces/lock-options.interface';
import type { LockHolderState } from './interfaces/lock-state.interface';
import type { MongoLockHandle } from './lock-handle';
import type { ServiceRuntime } from './service-runtime';
import type { ScopeHoldersRemoved } from './store/line/line-admin';
import { fail, optionsObject } from './option-checks';
import { fitsLong } from './store/bson-values';
import { entryFenceOf, FENCES_PER_ENTRY } from './store/line/line-document';
import { MAX_HOLDERS_PER_KEY } from './store/lock-modes';
import { settlesWithin } from './util/timers';

/** `ForceReleaseOptions`, checked: the listed holders' entry fences, or undefined for all. */
export function forceReleaseFences(options: ForceReleaseOptions | undefined): bigint[] | undefined {
  const { fences } = optionsObject(options, ['fences']);
  if (fences === undefined) return undefined;
  const most = MAX_HOLDERS_PER_KEY;
  if (!Array.isArray(fences) || fences.length > most) {
    fail('fences', `an array of at most ${most} fences (as inspect() reports them)`, fences);
  }
  // `Array.from`, not `map`: a hole is checked (and refused) too.
  const entries = Array.from(fences as unknown[], (fence, index) => {
    if (typeof fence !== 'bigint' || fence < 0n || !fitsLong(fence / FENCES_PER_ENTRY)) {
      fail(`fences[${index}]`, 'a fence as inspect() reports it: a bigint from 0n', fence);
    }
    return entryFenceOf(fence);
  });
  return [...new Set(entries)];
}

/**
 * `LockService.forceRelease`: frees `key` whoever holds it (with `fences`, the holders of those
 * entries only); the holders released.
 */
export async function forceReleaseKey(
  runtime: ServiceRuntime,
  key: string,
  fences?: readonly bigint[],
): Promise<LockHolderState[]> {
  // Nobody listed: nobody to free (an operator was shown a free key).
  if (fences?.length === 0) return [];
  const { held, options } = runtime.deps;
  const { holderId, operationTimeoutMs } = options;
  // Before any release here can pass the key on. Local holders are told first, so their work
  // stops before another instance holds the key; their releases wait for the command, as one
  // sent before it could hand the key to a waiting process whose grant the command would free.
  const commandDone = runtime.lines?.beforeForceRelease(key);
  const reason = `forceRelease(${JSON.stringify(key)}) released it`;
  const fenceOf = (handle: MongoLockHandle) => handle.fences.get(key) ?? handle.fence;
  const listed = new Set(fences);
  const shown = (handle: MongoLockHandle) =>
    fences === undefined || listed.has(entryFenceOf(fenceOf(handle)));
  let here: MongoLockHandle[] = [];
  let revoking: Promise<unknown>;
  let released: LockHolderState[];
  let endsAt: number;
  let lines: Awaited<ReturnType<ServiceRuntime['started']>>;
  try {
    lines = await runtime.started();
    endsAt = performance.now() + operationTimeoutMs;
    revoking = held.revokeKey(key, lines, reason, shown).then((handles) => (here = handles));
    released = await lines.store.forceRelease(key, fences);
  } finally {
    commandDone?.();
  }
  // A join of ours answered while the command was in flight, which the command removed too: a
  // handle made since is told now; a call still taking the key takes it again (told above).
  // (From `released`: a command sent before this service started remembered nothing.)
  const removedHere = new Set(released.filter((h) => h.holderId === holderId).map((h) => h.fence));
  const late = held.revokeKey(key, lines, reason, (handle) =>
    removedHere.has(entryFenceOf(fenceOf(handle))),
  );
  await settlesWithin(Promise.all([revoking, late]), endsAt - performance.now());
  // A local holder's own release may have freed its lease before the command did.
  const reported = new Set(released.map((holder) => `${holder.holderId}\0${holder.fence}`));
  for (const handle of here) {
    const fence = fenceOf(handle);
    // The server names an entry by its first fence; a holder it was handed to has a later one.
    if (reported.has(`${holderId}\0${entryFenceOf(fence)}`)) continue;
    const scope = handle.scope === undefined ? {} : { scope: handle.scope };
    const weight = handle.permits?.held ?? 1;
    released.push({ holderId, fence, weight, remainingMs: 0, ...scope });
  }
  return released;
}

/** `LockService.releaseScope`: how many locks of `scope` were released while live. */
export async function releaseScopeEverywhere(
  runtime: ServiceRuntime,
  scope: string,
): Promise<number> {
  const { held, options } = runtime.deps;
  const lines = await runtime.started();
  const endsAt = performance.now() + options.operationTimeoutMs;
  const reason = `releaseScope(${JSON.stringify(scope)}) released it`;
  const ofScope = (handle: MongoLockHandle) => handle.scope === scope;
  // The command frees every lease of the scope, local ones included, so local give-backs are
  // awaited only within the command's bound; one still retrying goes on uncounted. They are
  // sent once it is answered: the command decides who holds next.
  let here = 0;
  const leavesHeld = lines.beforeScopeRelease(held.keysOfScope(scope));
  let removed: ScopeHoldersRemoved[];
  let revoking: Promise<unknown>;
  try {
    revoking = held.revokeAll(reason, undefined, ofScope).then((count) => (here = count));
    removed = await lines.store.releaseScope(scope);
  } finally {
    leavesHeld();
  }
  // As for forceRelease: a call still taking a removed key takes it again, and a handle made
  // while the command was in flight from a removed entry is told now.
  const removedHere = new Set<string>();
  for (const { key, holders } of removed) {
    lines.operatorChanged(key);
    for (const holder of holders) {
      if (holder.holderId === options.holderId) removedHere.add(`${key}\0${holder.fence}`);
    }
  }
  const removedFromHere = (handle: MongoLockHandle) =>
    [...handle.fences].some(([key, fence]) => removedHere.has(`${key}\0${entryFenceOf(fence)}`));
  const late = held.revokeAll(reason, undefined, (h) => ofScope(h) && removedFromHere(h));
  await settlesWithin(Promise.all([revoking, late]), endsAt - performance.now());
  return here + removed.reduce((sum, { holders }) => sum + holders.length, 0);
}
