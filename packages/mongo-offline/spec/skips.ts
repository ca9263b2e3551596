// The one list of spec tests not run against the offline test server, each with its reason.
// Applied only when the fixture gives the offline server; a real MongoDB runs everything its
// runOnRequirements allow. Keep it short: a gap the server should close belongs in GAPS.md.

export interface SkipEntry {
  /**
   * Spec file path relative to the spec folder, e.g. `crud-legacy-v1/read/find-collation.json`;
   * `*` stands for any characters.
   */
  file: string;
  /** A test description, or `*` for every test of the file. */
  test: string;
  reason: string;
}

export const OFFLINE_SKIPS: readonly SkipEntry[] = [
  ...['insertOne', 'insertMany', 'bulkWrite'].map((via) => ({
    file: 'crud/create-null-ids.json',
    test: `inserting _id with type null via ${via}`,
    // Fails on a real MongoDB too: not a server gap. Kept out of the offline numbers.
    reason: 'the mongodb 7.9 driver replaces `_id: null` with a new ObjectId before sending it',
  })),
];

function fileMatches(pattern: string, file: string): boolean {
  const escaped = pattern.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'));
  // Matched against the end of the file's path, so a subfolder or a copy of the spec folder works.
  return new RegExp(`(^|/)${escaped.join('.*')}$`).test(file);
}

function matches(entry: SkipEntry, file: string, test: string): boolean {
  return fileMatches(entry.file, file) && (entry.test === '*' || entry.test === test);
}

/** `file`: the spec file's path, relative to the spec folder or absolute (forward slashes). */
export function offlineSkipReason(
  file: string,
  test: string,
  list: readonly SkipEntry[] = OFFLINE_SKIPS,
): string | undefined {
  return list.find((entry) => matches(entry, file, test))?.reason;
}

/** Entries that matched no test: stale after a spec update, or fixed by the server; remove them. */
export function unusedSkips(
  seen: ReadonlyArray<{ path: string; description: string }>,
  list: readonly SkipEntry[] = OFFLINE_SKIPS,
) {
  return list.filter((entry) => !seen.some((t) => matches(entry, t.path, t.description)));
}
