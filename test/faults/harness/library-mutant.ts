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
 * Builds the mutant (its copy named `<prefix>-<name>`), runs it, adds its row to `rows`, and
 * returns the violations that catch it; the copy is removed afterwards.
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
    const outcome = await mutant.run(server, libDir);
    const caught = outcome.violations.filter(
      (v) => mutant.caughtAs.includes(v.kind) && (mutant.accept?.(v) ?? true),
    );
    rows.push({
      scenario: `mutant: ${mutant.name}`,
      operations: outcome.operations,
      violations: outcome.violations.length,
      timeMs: Date.now() - startedAt,
      notes: `caught by ${caught.length} ${mutant.caughtAs.join('/')}; e.g. ${
        caught[0]?.detail.slice(0, 200) ?? '-'
      }`,
    });
    return caught;
  } finally {
    removeModesMutant(libDir);
  }
}
