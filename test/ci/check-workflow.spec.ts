import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// .ci/check-workflow.mjs: the real workflow passes; each broken one fails, naming the problem.

const root = join(__dirname, '../..');
const checker = join(root, '.ci/check-workflow.mjs');

let temp: string;
beforeAll(() => {
  temp = mkdtempSync(join(tmpdir(), 'check-workflow-'));
});
afterAll(() => {
  rmSync(temp, { recursive: true, force: true });
});

function check(workflowDir?: string, packageRoot = root) {
  const args = workflowDir ? [checker, workflowDir, packageRoot] : [checker];
  const run = spawnSync(process.execPath, args, { cwd: root, encoding: 'utf8' });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

let count = 0;
/** A folder holding one workflow, `ci.yml`. */
function workflow(yaml: string): string {
  const dir = join(temp, `workflows-${++count}`);
  mkdirSync(dir);
  writeFileSync(join(dir, 'ci.yml'), yaml);
  return dir;
}

/** A job `build` with these steps (YAML, indented as list items under `steps:`). */
const withSteps = (steps: string, matrix = '') => `
on: push
jobs:
  build:
    runs-on: ubuntu-latest${matrix}
    steps:
      - uses: actions/checkout@v4
      - run: npm ci
${steps}`;

it("passes the repository's workflow, one line per file", () => {
  const result = check();
  expect(result.stderr).toBe('');
  expect(result.status).toBe(0);
  expect(result.stdout).toMatch(/^ci\.yml: 3 jobs, \d+ steps, \d+ commands checked$/m);
});

it('passes a valid workflow: multi-line scripts, chains, cd, matrix, installs first', () => {
  const dir = workflow(
    withSteps(
      `      - run: |
          npm run lint && npm run typecheck # a comment: npm run nothing
          cd compat && npm run build
          npx tsc --version
      - run: node .ci/check-workflow.mjs
        env:
          NODE: \${{ matrix.node }}`,
      `
    strategy:
      matrix:
        node: [20, 22]`,
    ),
  );
  const result = check(dir);
  expect(result.stderr).toBe('');
  expect(result.stdout).toBe('ci.yml: 1 jobs, 4 steps, 7 commands checked\n');
});

it('fails on an npm script that package.json does not have', () => {
  const result = check(workflow(withSteps('      - run: npm ci && npm run lint && npm run lnit')));
  expect(result.status).toBe(1);
  expect(result.stderr).toContain(
    'ci.yml: job "build", step 3 "npm ci && npm run lint && npm run lnit": `npm run lnit`: ' +
      'no script "lnit" in package.json (did you mean "lint"?)',
  );
});

it('fails on a matrix key the job does not have', () => {
  const dir = workflow(
    withSteps(
      `      - uses: actions/setup-node@v4
        with:
          node-version: \${{ matrix.nodejs }}`,
      `
    strategy:
      matrix:
        node: [20, 22]`,
    ),
  );
  const result = check(dir);
  expect(result.status).toBe(1);
  expect(result.stderr).toContain(
    'ci.yml: job "build", step 3 "actions/setup-node@v4" (with.node-version): ' +
      "${{ matrix.nodejs }} is not a key of the job's matrix: its matrix has node",
  );
});

it('fails on a step with neither run nor uses', () => {
  const result = check(workflow(withSteps('      - name: Test\n        env: { CI: true }')));
  expect(result.status).toBe(1);
  expect(result.stderr).toContain(
    'ci.yml: job "build", step 3 "Test": has neither "uses" nor "run"',
  );
});

it('fails on invalid YAML, with its line', () => {
  const result = check(workflow('on: push\njobs:\n  build: { runs-on: ubuntu-latest\n'));
  expect(result.status).toBe(1);
  expect(result.stderr).toMatch(/^ci\.yml: invalid YAML: .* at line \d+, column \d+/m);
});

it('fails on a job without runs-on or steps', () => {
  const result = check(workflow('on: push\njobs:\n  build:\n    name: Build\n'));
  expect(result.status).toBe(1);
  expect(result.stderr).toContain('ci.yml: job "build": no "runs-on"');
  expect(result.stderr).toContain('ci.yml: job "build": no steps');
});

it('fails on npx of a bin not in node_modules/.bin, and on npm before npm ci', () => {
  const dir = workflow(`
on: push
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - run: npm test
      - run: npm ci
      - run: npx no-such-bin --version`);
  const result = check(dir);
  expect(result.status).toBe(1);
  expect(result.stderr).toContain(
    '`npm test`: runs before the job installs its dependencies (npm ci)',
  );
  expect(result.stderr).toContain(
    '`npx no-such-bin --version`: no "no-such-bin" in node_modules/.bin',
  );
});

it('fails on npm test without a test script, npm ci without a lockfile, a missing bin', () => {
  const pkg = join(temp, 'package');
  mkdirSync(pkg);
  writeFileSync(join(pkg, 'package.json'), JSON.stringify({ scripts: { docs: 'typedoc-x' } }));
  const result = check(
    workflow(withSteps('      - run: npm test\n      - run: npm run docs')),
    pkg,
  );
  expect(result.status).toBe(1);
  expect(result.stderr).toContain('`npm ci`: npm ci needs a package-lock.json in .');
  expect(result.stderr).toContain('`npm test`: npm test needs a "test" script in package.json');
  expect(result.stderr).toContain(
    '`npm run docs` → script "docs" runs `typedoc-x`: "typedoc-x" is not in node_modules/.bin',
  );
});
