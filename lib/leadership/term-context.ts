import { AsyncLocalStorage } from 'node:async_hooks';
import type { LeaderTerm } from './leader-term';

const storage = new AsyncLocalStorage<LeaderTerm>();

/** Runs `fn` with `term` as the current async context's leader term (`@OnlyLeader`). */
export function runInTerm<T>(term: LeaderTerm, fn: () => T): T {
  return storage.run(term, fn);
}

/** The term the current async context runs under, while it is still on. */
export function currentLeaderTerm(): LeaderTerm | undefined {
  const term = storage.getStore();
  return term?.active ? term : undefined;
}
