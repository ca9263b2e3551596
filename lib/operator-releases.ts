import type { LockHolderState } from './interfaces/lock-state.interface';
import type { MongoLockHandle } from './lock-handle';
import type { ServiceRuntime } from './service-runtime';
import { settlesWithin } from './util/timers';

/** `LockService.forceRelease`: frees `key` whoever holds it; the holders released. */
export async function forceReleaseKey(
  runtime: ServiceRuntime,
  key: string,
): Promise<LockHolderState[]> {
  const { held, options } = runtime.deps;
  const { holderId, operationTimeoutMs } = options;
  runtime.lines?.beforeForceRelease(key);
  const { store } = await runtime.started();
  const endsAt = performance.now() + operationTimeoutMs;
  // The command first: a local holder's own give-back, sent before it, could hand the key to
  // a waiting process, whose grant the command would then free under it.
  const released = await store.forceRelease(key);
  let here: MongoLockHandle[] = [];
  const revoking = held
    .revokeKey(key, `forceRelease(${JSON.stringify(key)}) released it`)
    .then((handles) => (here = handles));
  await settlesWithin(revoking, endsAt - performance.now());
  // A local holder's own release may have freed its lease before the command did.
  const reported = new Set(released.map((holder) => `${holder.holderId}\0${holder.fence}`));
  for (const handle of here) {
    const fence = handle.fences.get(key) ?? handle.fence;
    if (reported.has(`${holderId}\0${fence}`)) continue;
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
  const { operationTimeoutMs } = options;
  const { store } = await runtime.started();
  const endsAt = performance.now() + operationTimeoutMs;
  // Holders here are told at once. The one command frees every lease of the scope, theirs
  // included, so the call waits for their give-backs only within the command's bound; one
  // still retrying then goes on in the background (and is not counted).
  let here = 0;
  const revoking = held
    .revokeScope(scope, `releaseScope(${JSON.stringify(scope)}) released it`)
    .then((count) => (here = count));
  const there = await store.releaseScope(scope);
  await settlesWithin(revoking, endsAt - performance.now());
  return here + there;
}
