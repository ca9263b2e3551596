export interface ScenarioRow {
  scenario: string;
  operations: number;
  violations: number;
  timeMs: number;
  notes?: string;
}

/** The suite's closing table: one row per scenario, as plain text that reads well in CI logs. */
export function formatSummaryTable(rows: ScenarioRow[]): string {
  const header = ['scenario', 'operations', 'violations', 'time', 'notes'];
  const body = rows.map((r) => [
    r.scenario,
    String(r.operations),
    String(r.violations),
    `${(r.timeMs / 1000).toFixed(1)} s`,
    r.notes ?? '',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)));
  const line = (cells: string[]) =>
    cells.map((cell, i) =>
      i === 1 || i === 2 ? cell.padStart(widths[i]) : cell.padEnd(widths[i]),
    );
  const rule = widths.map((w) => '-'.repeat(w));
  return [line(header), rule, ...body.map(line)]
    .map((cells) => `| ${cells.join(' | ')} |`)
    .join('\n');
}

/** What a scenario's run reports: its operations, violations and notes. */
export interface ScenarioOutcome<V> {
  operations: number;
  violations: V[];
  notes?: string;
}

/** Runs one scenario, adds its row to the suite's table, and returns its violations. */
export async function runScenarioRow<V>(
  scenario: string,
  run: () => Promise<ScenarioOutcome<V>>,
  rows: ScenarioRow[],
): Promise<V[]> {
  const startedAt = Date.now();
  const outcome = await run();
  rows.push({
    scenario,
    operations: outcome.operations,
    violations: outcome.violations.length,
    timeMs: Date.now() - startedAt,
    notes: outcome.notes,
  });
  return outcome.violations;
}
