import type { FaultServer } from '../../support/fault-server';
import type { Violation, ViolationKind } from '../history/history';
import { makeModesMutant, removeModesMutant, type MutantPatch } from '../scenarios/modes-run';
import type { ScenarioOutcome } from '../scenarios/scenario';
import type { ScenarioRow } from './summary-table';

/**
 * A broken build of the library a scenario must catch: it patches a copy of `lib/`
 * (`makeModesMutant`, the technique of `mutation.fault-spec.ts`), runs a shortened scenario
 * with every worker on the copy, and expects violations of the given kinds.
 */
export interface LibraryMutant {
  name: string;
  patches: MutantPatch[];
  run(server: FaultServer, libDir: string): Promise<ScenarioOutcome>;
  /** The run must report at least one violation of these kinds (and `accept` it, if given). */
  caughtAs: ViolationKind[];
  accept?: (violation: Violation) => boolean;
}

/**
 * How many times a mutant's scenario may run before it counts as missed. Its faults land by
 * timing, and a loaded CI machine runs fewer sections: one run caught a mutant with 6 of 31
 * sections where a quiet one has over a hundred, and another caught nothing. A mutant any of
 * these runs catches is one the suite, repeated, catches.
 */
const MUTANT_RUNS = 3;

/**
 * Builds the mutant (its copy named `<prefix>-<name>`), runs it until caught (at most
 * {@link MUTANT_RUNS} times), adds its row to `rows`, and returns the violations that catch
 * it; the copy is removed afterwards.
 */
export async function runLibraryMutant(
  server: FaultServer,
  prefix: string,
  mutant: LibraryMutant,
  rows: ScenarioRow[],
): Promise<Violation[]> {
  const startedAt = Date.now();
  const libDir = makeModesMutant(`${prefix}-${mutant.name.replace(/\W+/g, '-')}`, mutant.patches);
  try {
    let operations = 0;
    let violations = 0;
    let caught: Violation[] = [];
    let runs = 0;
    while (caught.length === 0 && runs < MUTANT_RUNS) {
      const outcome = await mutant.run(server, libDir);
      runs += 1;
      operations += outcome.operations;
      violations += outcome.violations.length;
      caught = outcome.violations.filter(
        (v) => mutant.caughtAs.includes(v.kind) && (mutant.accept?.(v) ?? true),
      );
    }
    rows.push({
      scenario: `mutant: ${mutant.name}`,
      operations,
      violations,
      timeMs: Date.now() - startedAt,
      notes: `caught by ${caught.length} ${mutant.caughtAs.join('/')} (run ${runs} of up to ${MUTANT_RUNS}); e.g. ${
        caught[0]?.detail.slice(0, 200) ?? '-'
      }`,
    });
    return caught;
  } finally {
    removeModesMutant(libDir);
  }
}
