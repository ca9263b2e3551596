import type { ModuleMetadata } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { setTimeout as sleep } from 'node:timers/promises';

/** A testing module, compiled and initialised (so `@Locked` provider methods are bound). */
export async function startTestingModule(metadata: ModuleMetadata): Promise<TestingModule> {
  const moduleRef = await Test.createTestingModule(metadata).compile();
  moduleRef.useLogger(false);
  await moduleRef.init();
  return moduleRef;
}

/** Polls `check` until it returns true. */
export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 5_000) {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(5);
  }
}

/** A promise with its resolve function, to hold a locked method open while a test looks. */
export function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

/** Milliseconds `promise` takes to settle from now. */
export async function settleTime(promise: Promise<unknown>): Promise<number> {
  const started = performance.now();
  await promise.catch(() => undefined);
  return performance.now() - started;
}

/** How `promise` stands after up to `ms` of real time (whatever the fake clock): 'pending' if open. */
export async function outcomeAfter(promise: Promise<unknown>, ms: number): Promise<unknown> {
  let outcome: unknown = 'pending';
  promise.then(
    (value) => (outcome = value),
    (error: unknown) => (outcome = error),
  );
  for (let waited = 0; waited < ms && outcome === 'pending'; waited += 20) await sleep(20);
  return outcome;
}
