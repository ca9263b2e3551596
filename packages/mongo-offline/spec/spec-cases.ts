// Turns the spec folder into a flat list of test cases, each runnable or skipped with a reason.
// Shared by the CLI and the Jest suite.
import { relative, resolve, sep } from 'node:path';
import { runCrudV1Test } from './crud-v1/run-crud-v1-test';
import { unmetLegacyRequirements, unmetRequirements } from './requirements';
import type { RunContext } from './run-context';
import type { ServerInfo } from './server-info';
import { offlineSkipReason } from './skips';
import { defaultSpecDir, findSpecFiles, loadSpecFile, type SpecFile } from './spec-files';
import { runUnifiedTest, unsupportedSchemaVersion } from './unified/run-unified-test';

export interface SpecCase {
  /** Path relative to the spec folder (or the folder run, when outside it). */
  file: string;
  /** Full path with forward slashes, what the skip list matches. */
  path: string;
  description: string;
  /** Set when the case is not run: unmet runOnRequirements, skipReason or the skip list. */
  skipReason?: string;
  run(ctx: RunContext): Promise<void>;
}

export interface CollectOptions {
  /** Apply the offline server's skip list (default). Off to see which listed tests now pass. */
  applySkipList?: boolean;
}

// The unified format's own tests: valid-fail files must fail; invalid files test its JSON schema.
const VALID_FAIL = /(^|\/)unified-format\/valid-fail\//;
const SCHEMA_INVALID = /(^|\/)unified-format\/invalid\//;

function skipReasonOf(spec: SpecFile, test: any, server: ServerInfo, options: CollectOptions) {
  const { content } = spec;
  const path = spec.path.split(sep).join('/');
  if (SCHEMA_INVALID.test(path))
    return 'schema-invalid file: it tests the JSON schema, not a server';
  // An incompatible file must fail, not skip (the format's rule).
  if (spec.format === 'unified' && unsupportedSchemaVersion(content.schemaVersion))
    return undefined;
  const fileReason =
    spec.format === 'unified'
      ? unmetRequirements(content.runOnRequirements, server)
      : unmetLegacyRequirements(content, server);
  if (fileReason) return `runOnRequirements: ${fileReason}`;
  if (test.skipReason) return `skipReason: ${test.skipReason}`;
  const testReason =
    spec.format === 'unified' ? unmetRequirements(test.runOnRequirements, server) : undefined;
  if (testReason) return `runOnRequirements: ${testReason}`;
  const useList = server.kind === 'offline' && options.applySkipList !== false;
  const listed = useList ? offlineSkipReason(path, String(test.description)) : undefined;
  return listed ? `skip list: ${listed}` : undefined;
}

/** A valid-fail test passes when running it fails. */
async function expectFailure(run: () => Promise<void>) {
  try {
    await run();
  } catch {
    return;
  }
  throw new Error('This valid-fail test should have failed, but passed');
}

function casesOfFile(spec: SpecFile, server: ServerInfo, options: CollectOptions): SpecCase[] {
  const { content } = spec;
  const path = spec.path.split(sep).join('/');
  const tests: any[] = content.tests ?? [];
  return tests.map((test) => {
    const runTest =
      spec.format === 'unified'
        ? (ctx: RunContext) => runUnifiedTest(content, test, ctx)
        : (ctx: RunContext) => runCrudV1Test(content, test, ctx);
    const run = VALID_FAIL.test(path)
      ? (ctx: RunContext) => expectFailure(() => runTest(ctx))
      : runTest;
    const skipReason = skipReasonOf(spec, test, server, options);
    return { file: spec.name, path, description: String(test.description), skipReason, run };
  });
}

/** Every test of every spec file under `dir`, in file order. */
export function collectSpecCases(
  dir: string,
  server: ServerInfo,
  options: CollectOptions = {},
): SpecCase[] {
  // Inside the default spec folder, names stay relative to it whatever subfolder is run.
  const defaultDir = defaultSpecDir();
  const root = resolve(dir).startsWith(defaultDir + sep) ? defaultDir : dir;
  return findSpecFiles(dir).flatMap((path) => {
    let spec: SpecFile;
    try {
      spec = loadSpecFile(root, path);
    } catch (error) {
      // A file that cannot be read is one failing case, not a crashed run.
      const file = relative(root, path).split(sep).join('/');
      const run = () => Promise.reject(error instanceof Error ? error : new Error(String(error)));
      const fullPath = path.split(sep).join('/');
      return [{ file, path: fullPath, description: 'read the spec file', run }];
    }
    return casesOfFile(spec, server, options);
  });
}

/** Cases grouped by file, in order. */
export function groupByFile(cases: SpecCase[]): Map<string, SpecCase[]> {
  const files = new Map<string, SpecCase[]>();
  for (const c of cases) files.set(c.file, [...(files.get(c.file) ?? []), c]);
  return files;
}
