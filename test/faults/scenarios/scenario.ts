import { sharedClockMs } from '@nestjs-mongo-lock/process-harness';
import type { FaultServer } from '../../support/fault-server';
import type { Violation } from '../history/history';

export interface ScenarioOutcome {
  /** Critical sections, or other units of work, the scenario checked. */
  operations: number;
  violations: Violation[];
  notes?: string;
}

export interface Scenario {
  name: string;
  run(server: FaultServer): Promise<ScenarioOutcome>;
}

/** A scenario-specific promise that did not hold, in the checker's terms. */
export function scenarioViolation(key: string, detail: string): Violation {
  return { kind: 'scenario', key, detail };
}

/** Collects expectations without throwing, so one run reports every broken promise at once. */
export class Expectations {
  readonly violations: Violation[] = [];

  that(condition: boolean, key: string, detail: string): void {
    if (!condition) this.violations.push(scenarioViolation(key, detail));
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
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
