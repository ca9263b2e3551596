// The one list of spec tests not run against the offline test server, each with its reason.
// Applied only when the fixture gives the offline server; a real MongoDB runs everything its
// runOnRequirements allow. Keep it short: a gap the server should close belongs in GAPS.md.

export interface SkipEntry {
  /** Spec file path relative to the spec folder, e.g. `crud-legacy-v1/read/find-collation.json`. */
  file: string;
  /** A test description, or `*` for every test of the file. */
  test: string;
  reason: string;
}

export const OFFLINE_SKIPS: readonly SkipEntry[] = [];

export function offlineSkipReason(file: string, test: string): string | undefined {
  const entry = OFFLINE_SKIPS.find((s) => s.file === file && (s.test === '*' || s.test === test));
  return entry?.reason;
}

/** Entries that matched no test: stale after a spec update, to be removed. */
export function unusedSkips(seen: ReadonlyArray<{ file: string; test: string }>): SkipEntry[] {
  return OFFLINE_SKIPS.filter(
    (s) => !seen.some((t) => t.file === s.file && (s.test === '*' || s.test === t.test)),
  );
}
