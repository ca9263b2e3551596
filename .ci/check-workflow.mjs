#!/usr/bin/env node
// Checks the GitHub Actions workflows, which cannot run here:
//   node .ci/check-workflow.mjs [WORKFLOW_DIR [PACKAGE_ROOT]]
// (defaults: this repository's). The YAML must parse and have the structure GitHub needs, and
// what `run` scripts run must exist: npm scripts (and what they run), npx bins, node's files.
// Prints one line per workflow, or one per problem on stderr and exits 1.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const [dirArg, rootArg] = process.argv.slice(2);
const workflowDir = path.resolve(dirArg ?? path.join(here, '.github', 'workflows'));
const root = path.resolve(rootArg ?? here);

// Words before a command that are not one (`until docker ...; do sleep 1; done`).
const KEYWORDS = new Set('if then else elif do while until ! { } fi done'.split(' '));
const EARLY = 'runs before the job installs its dependencies (npm ci)';

const isMapping = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);
const rel = (file) => path.relative(root, file).split(path.sep).join('/') || '.';
// In a step, npm scripts and npx need the job's `npm ci` first; in a script, npm has installed.
const early = (at) => !at.chain && !at.job.installed;

/** The folder npm works in from `dir`: the nearest one with a package.json. */
function packageDir(dir) {
  for (let at = dir; at !== path.dirname(at); at = path.dirname(at)) {
    if (existsSync(path.join(at, 'package.json'))) return at;
  }
  return dir;
}

/** Levenshtein distance, for "did you mean". */
function distance(a, b) {
  let row = [...Array(b.length + 1).keys()];
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return row[b.length];
}

function suggest(name, names) {
  const near = names.filter((n) => distance(name, n) <= Math.min(2, name.length / 2));
  return near.length ? ` (did you mean ${near.map((n) => `"${n}"`).join(' or ')}?)` : '';
}

// A script's simple commands, as words: split on lines, `&&`, `||`, `|` and `;`, without comments,
// redirections, keywords and `VAR=value` prefixes. Quotes are not parsed: the words that matter
// here (commands, scripts, files) are not quoted in CI scripts.
function commands(script) {
  return script
    .replace(/\\\n/g, ' ')
    .split('\n')
    .flatMap((line) => line.replace(/(^|\s)#.*/, '').split(/&&|\|\|?|;/))
    .map((part) => {
      const words = part
        .replace(/\d*[<>]{1,2}(&\d+|\s*\S+)/g, ' ')
        .split(/\s+/)
        .filter(Boolean)
        .map((word) => word.replace(/^(['"])(.*)\1$/, '$2'));
      while (words.length && (KEYWORDS.has(words[0]) || /^\w+=/.test(words[0]))) words.shift();
      return words;
    })
    .filter((words) => words.length);
}

// Checks a script's commands, following `cd`; returns how many there were. `at`: cwd, where (job
// and step), command (the step's), chain (` → script "x"`: the npm scripts it is in, '' in a
// step), job ({ installed }), report, visited (the scripts already followed).
function checkScript(script, at) {
  const list = commands(script);
  let cwd = at.cwd;
  for (const words of list) {
    if (words[0] === 'cd') cwd = path.resolve(cwd, words[1] ?? '.');
    else checkCommand(words, { ...at, cwd, command: at.command ?? words.join(' ') });
  }
  return list.length;
}

function checkCommand(words, at) {
  const [name, ...args] = words;
  const fail = (message) => {
    const inner = at.chain ? ` runs \`${words.join(' ')}\`` : '';
    at.report(`${at.where}: \`${at.command}\`${at.chain}${inner}: ${message}`);
  };
  const binDir = path.join(packageDir(at.cwd), 'node_modules', '.bin');
  if (name.includes('$')) return; // made at run time
  if (name === 'npm') return checkNpm(args, at, fail);
  if (name === 'npx') {
    if (early(at)) fail(EARLY);
    const bin = args.find((arg) => !arg.startsWith('-'));
    if (bin && !existsSync(path.join(binDir, bin))) {
      fail(`no "${bin}" in ${rel(binDir)}: npx would download a package of that name`);
    }
    return;
  }
  // `node FILE`, `./FILE`; `node -e`, `node --version` and the like name no file.
  const file = name === 'node' ? args[0] : name.includes('/') ? name : null;
  if (file && !file.startsWith('-') && !file.includes('$')) {
    const full = path.resolve(at.cwd, file);
    if (!existsSync(full)) fail(`${rel(full)} does not exist`);
    return;
  }
  // In a step, other commands are the runner's tools (docker, ...), which are not all here.
  if (!at.chain || name === 'node') return;
  const dirs = [binDir, ...(process.env.PATH ?? '').split(path.delimiter)];
  if (!dirs.some((dir) => dir && existsSync(path.join(dir, name)))) {
    fail(`"${name}" is not in node_modules/.bin or on PATH`);
  }
}

function checkNpm(args, at, fail) {
  const [command, script] = args.filter((arg) => !arg.startsWith('-')); // npm's own options
  const dir = packageDir(at.cwd);
  const packageFile = path.join(dir, 'package.json');
  if (!existsSync(packageFile)) return fail(`no package.json in ${rel(dir)} or above`);
  const scripts = JSON.parse(readFileSync(packageFile, 'utf8')).scripts ?? {};
  if (/^(ci|install|i)$/.test(command)) {
    if (!at.chain) at.job.installed = true;
    if (command === 'ci' && !existsSync(path.join(dir, 'package-lock.json'))) {
      fail(`npm ci needs a package-lock.json in ${rel(dir)}`);
    }
    return;
  }
  if (!/^(run|test|start)$/.test(command)) return;
  if (early(at)) fail(EARLY);
  const name = command === 'run' ? script : command;
  if (!name || name.includes('$')) return; // `npm run` alone lists the scripts
  if (!Object.hasOwn(scripts, name)) {
    return command === 'run'
      ? fail(`no script "${name}" in ${rel(packageFile)}${suggest(name, Object.keys(scripts))}`)
      : fail(`npm ${name} needs a "${name}" script in ${rel(packageFile)}`);
  }
  // What the script runs must exist too: once per script, which also stops loops.
  const key = `${dir}\0${name}`;
  if (at.visited.has(key)) return;
  at.visited.add(key);
  checkScript(scripts[name], { ...at, cwd: dir, chain: `${at.chain} → script "${name}"` });
}

/** Every string in `value`, with its path of keys. */
function* strings(value, keys = []) {
  if (typeof value === 'string') yield [value, keys];
  else if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) yield* strings(item, [...keys, key]);
  }
}

function stepLabel(step, index) {
  const label = step.name ?? step.uses ?? step.run ?? '';
  const first = String(label).trim().split('\n')[0];
  const text = first.length > 60 ? `${first.slice(0, 57)}...` : first;
  return `step ${index + 1}${text ? ` "${text}"` : ''}`;
}

/** Reports a workflow's problems; returns its counts. */
function checkWorkflow(text, report) {
  const counts = { jobs: 0, steps: 0, commands: 0 };
  const doc = YAML.parseDocument(text, { prettyErrors: true });
  for (const error of doc.errors) report(`invalid YAML: ${error.message.split('\n')[0]}`);
  if (doc.errors.length) return counts;
  const jobs = doc.toJS()?.jobs;
  if (!isMapping(jobs) || !Object.keys(jobs).length) report('no jobs');
  const visited = new Set();
  for (const [id, value] of Object.entries(isMapping(jobs) ? jobs : {})) {
    counts.jobs++;
    const job = isMapping(value) ? value : {};
    const jobName = `job "${id}"`;
    const missing = [job.needs ?? []].flat().filter((need) => !Object.hasOwn(jobs, need));
    for (const need of missing) report(`${jobName}: needs "${need}", which is not a job here`);
    // The matrix's keys: its own and those its `include` entries add.
    const matrix = isMapping(job.strategy?.matrix) ? job.strategy.matrix : null;
    const entries = [matrix ?? {}, ...[matrix?.include ?? []].flat()];
    const keys = matrix && entries.flatMap(Object.keys).filter((k) => !/^(in|ex)clude$/.test(k));
    const checkMatrix = (value, place) => {
      for (const [text, keyPath] of strings(value)) {
        const expressions = (text.match(/\$\{\{.*?\}\}/gs) ?? []).join(' ');
        for (const [, key] of expressions.matchAll(/(?<![\w.])matrix\.([\w-]+)/g)) {
          if (keys?.includes(key)) continue;
          const known = keys ? `its matrix has ${keys.join(', ')}` : 'it has no matrix';
          const ref = `\${{ matrix.${key} }}`;
          report(
            `${place} (${keyPath.join('.')}): ${ref} is not a key of the job's matrix: ${known}`,
          );
        }
      }
    };
    const { steps, strategy: _strategy, ...rest } = job;
    checkMatrix(rest, jobName);

    if (job['runs-on'] === undefined) report(`${jobName}: no "runs-on"`);
    if (!Array.isArray(steps) || !steps.length) report(`${jobName}: no steps`);
    const state = { installed: false };
    for (const [index, value] of (Array.isArray(steps) ? steps : []).entries()) {
      counts.steps++;
      const step = isMapping(value) ? value : {};
      const where = `${jobName}, ${stepLabel(step, index)}`;
      checkMatrix(step, where);
      const has = ['uses', 'run'].filter((key) => step[key] !== undefined);
      if (has.length === 0) report(`${where}: has neither "uses" nor "run"`);
      if (has.length === 2) report(`${where}: has both "uses" and "run"`);
      if (typeof step.run !== 'string') continue;
      const cwd = path.resolve(root, step['working-directory'] ?? '.');
      const at = { cwd, where, chain: '', job: state, report, visited };
      counts.commands += checkScript(step.run, at);
    }
  }
  return counts;
}

const files = existsSync(workflowDir) ? readdirSync(workflowDir) : [];
const workflows = files.filter((file) => /\.ya?ml$/.test(file)).sort();
if (!workflows.length) {
  process.stderr.write(`check-workflow: no workflow (*.yml, *.yaml) in ${workflowDir}\n`);
  process.exitCode = 1;
}
for (const file of workflows) {
  const problems = [];
  const text = readFileSync(path.join(workflowDir, file), 'utf8');
  const counts = checkWorkflow(text, (problem) => problems.push(problem));
  if (problems.length) {
    process.stderr.write(problems.map((problem) => `${file}: ${problem}\n`).join(''));
    process.exitCode = 1;
  } else {
    const { jobs, steps, commands: checked } = counts;
    process.stdout.write(`${file}: ${jobs} jobs, ${steps} steps, ${checked} commands checked\n`);
  }
}
