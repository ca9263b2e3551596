#!/usr/bin/env node
// Checks the GitHub Actions workflows, which cannot run here:
//   node .ci/check-workflow.mjs [WORKFLOW_DIR [PACKAGE_ROOT]]
// (defaults: this repository's .github/workflows and root). Exits 1 naming every problem.
//
// Every *.yml / *.yaml file must parse; every job needs `runs-on` and steps (or `uses`, a
// reusable workflow), `needs` must name jobs, `${{ matrix.X }}` a key of its job's matrix; every
// step needs `uses` (with an @ref) or `run`. In bash `run` scripts (multi-line, `&&` chains,
// `cd`, `working-directory`, `npm --prefix` and `-w` followed): `npm <command>` must be one;
// `npm run X` needs script X in the package.json npm would read (and, recursively, what X runs:
// its `npm run`s, its executables in node_modules/.bin, the shell or on PATH); `npm test`,
// `start` and `stop` their script; `npm ci` a lockfile and no package names; `npx X` a bin in
// node_modules/.bin; `node FILE` and `./FILE` an existing file (or one under a git-ignored folder:
// built). A job must install its dependencies (`npm ci`) before it runs scripts or npx. Commands
// inside `$( )` and `${{ }}`-made words are not checked.
import { accessSync, constants, existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// npm 10/11's commands and aliases (lib/utils/cmd-list.js), the typo aliases left out.
const NPM_COMMANDS = `access adduser audit bugs cache ci completion config dedupe deprecate diff
  dist-tag docs doctor edit exec explain explore find-dupes fund get help help-search init install
  install-ci-test install-test link ll login logout ls org outdated owner pack ping pkg prefix
  profile prune publish query rebuild repo restart root run sbom search set shrinkwrap star stars
  start stop team test token undeprecate uninstall unpublish unstar update version view whoami`
  .trim()
  .split(/\s+/);
const NPM_ALIASES = {
  author: 'owner', home: 'docs', issues: 'bugs', info: 'view', show: 'view', find: 'search',
  add: 'install', unlink: 'uninstall', remove: 'uninstall', rm: 'uninstall', r: 'uninstall',
  un: 'uninstall', rb: 'rebuild', list: 'ls', ln: 'link', create: 'init', i: 'install',
  it: 'install-test', cit: 'install-ci-test', u: 'update', up: 'update', c: 'config',
  s: 'search', se: 'search', tst: 'test', t: 'test', ddp: 'dedupe', v: 'view', 'run-script': 'run',
  'clean-install': 'ci', 'clean-install-test': 'install-ci-test', x: 'exec', why: 'explain',
  la: 'll', ic: 'ci', 'install-clean': 'ci', upgrade: 'update', rum: 'run', urn: 'run',
  'dist-tags': 'dist-tag', 'add-user': 'adduser',
}; // prettier-ignore
/** npm options that take the next word as their value (the others are switches). */
const NPM_VALUE_OPTIONS = new Set(
  `--prefix -C --workspace -w --loglevel --registry --cache --userconfig --globalconfig --tag
  --omit --include --script-shell --node-options --otp --access --before --install-strategy
  --pack-destination --package -p --call -c`.split(/\s+/),
);
const NPM_OPTION_ALIASES = {
  '-C': '--prefix',
  '-w': '--workspace',
  '-ws': '--workspaces',
  '-p': '--package',
  '-c': '--call',
};
const INSTALLS = new Set(['ci', 'install', 'install-test', 'install-ci-test']);
const NEEDS_INSTALL = new Set(['run', 'test', 'start', 'stop', 'restart', 'exec']);
/** The script an npm command runs. */
const LIFECYCLE_SCRIPTS = {
  test: 'test',
  start: 'start',
  stop: 'stop',
  'install-test': 'test',
  'install-ci-test': 'test',
};

/** Words a command line may start with before its command. */
const SHELL_KEYWORDS = new Set('if then else elif do while until ! { } fi done esac'.split(' '));
/** Words that run the command after them (and their own options). */
const SHELL_WRAPPERS = new Set(['time', 'exec', 'command', 'nohup', 'sudo']);
/** Compound commands whose words are not a command (`for x in ...`). */
const SHELL_COMPOUND = new Set(['for', 'case', 'select', 'function']);
const SHELL_BUILTINS = new Set(
  `. : [ [[ alias break cd continue declare echo eval exit export
  false local popd printf pushd pwd read return set shift source test trap true type ulimit umask
  unset wait`.split(/\s+/),
);

// ---------------------------------------------------------------------------------------------
// Shell: a bash script as a list of simple commands (their words, quotes removed) and subshell
// brackets. Enough for CI scripts: quotes, escapes, `${{ }}`, `$( )`, comments, line
// continuations, `&& || ; | &`, redirections (dropped) and here-documents (skipped).

/** The index of the bracket that closes the one at `open`. */
function closing(src, open) {
  const pair = { '(': ')', '{': '}' }[src[open]];
  let depth = 0;
  for (let i = open; i < src.length; i++) {
    if (src[i] === "'" || src[i] === '"') {
      const end = src.indexOf(src[i], i + 1);
      i = end < 0 ? src.length : end;
    } else if (src[i] === src[open]) depth++;
    else if (src[i] === pair && --depth === 0) return i;
  }
  return src.length - 1;
}

export function parseShell(src) {
  const items = [];
  let words = [];
  let word = null;
  let dropNextWord = false; // a redirection's target
  const heredocs = [];
  const endWord = () => {
    if (word === null) return;
    if (dropNextWord) dropNextWord = false;
    else words.push(word);
    word = null;
  };
  const endCommand = () => {
    endWord();
    if (words.length) items.push({ type: 'command', words });
    words = [];
  };
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (c === '\\') {
      if (src[i + 1] !== '\n') word = (word ?? '') + (src[i + 1] ?? '');
      i += 2;
    } else if (c === "'") {
      const end = src.indexOf("'", i + 1);
      word = (word ?? '') + src.slice(i + 1, end < 0 ? src.length : end);
      i = end < 0 ? src.length : end + 1;
    } else if (c === '"') {
      let j = i + 1;
      let text = '';
      while (j < src.length && src[j] !== '"') {
        if (src[j] === '\\' && '"\\$`\n'.includes(src[j + 1])) {
          if (src[j + 1] !== '\n') text += src[j + 1];
          j += 2;
        } else if (src[j] === '$' && src[j + 1] === '(') {
          const end = closing(src, j + 1);
          text += src.slice(j, end + 1);
          j = end + 1;
        } else text += src[j++];
      }
      word = (word ?? '') + text;
      i = j + 1;
    } else if (src.startsWith('${{', i)) {
      const end = src.indexOf('}}', i);
      const stop = end < 0 ? src.length : end + 2;
      word = (word ?? '') + src.slice(i, stop);
      i = stop;
    } else if (c === '$' && (src[i + 1] === '(' || src[i + 1] === '{')) {
      const end = closing(src, i + 1);
      word = (word ?? '') + src.slice(i, end + 1);
      i = end + 1;
    } else if (c === '`') {
      const end = src.indexOf('`', i + 1);
      const stop = end < 0 ? src.length : end + 1;
      word = (word ?? '') + src.slice(i, stop);
      i = stop;
    } else if (c === '#' && word === null) {
      while (i < src.length && src[i] !== '\n') i++;
    } else if (c === '\n') {
      endCommand();
      i++;
      for (const { delimiter, stripTabs } of heredocs.splice(0)) {
        while (i < src.length) {
          const eol = src.indexOf('\n', i) < 0 ? src.length : src.indexOf('\n', i);
          const line = src.slice(i, eol);
          i = eol + 1;
          if ((stripTabs ? line.replace(/^\t+/, '') : line) === delimiter) break;
        }
      }
    } else if (c === ' ' || c === '\t' || c === '\r') {
      endWord();
      i++;
    } else if (c === '&' && src[i + 1] === '>') {
      endWord();
      i += src[i + 2] === '>' ? 3 : 2;
      dropNextWord = true;
    } else if (';&|()'.includes(c)) {
      endCommand();
      if (c === '(') items.push({ type: 'open' });
      if (c === ')') items.push({ type: 'close' });
      i +=
        c !== '(' && c !== ')' && (src[i + 1] === c || (c === '|' && src[i + 1] === '&')) ? 2 : 1;
    } else if (c === '<' || c === '>') {
      // A file descriptor (2>&1) is not a word.
      if (word !== null && /^\d+$/.test(word)) word = null;
      else endWord();
      if (src.startsWith('<<<', i)) {
        i += 3;
      } else if (src.startsWith('<<', i)) {
        i += 2;
        const stripTabs = src[i] === '-';
        if (stripTabs) i++;
        const match = /^[ \t]*(?:'([^']*)'|"([^"]*)"|([^\s;&|<>()]+))/.exec(src.slice(i));
        if (match) {
          heredocs.push({
            delimiter: match[1] ?? match[2] ?? match[3].replace(/\\/g, ''),
            stripTabs,
          });
          i += match[0].length;
        }
        continue;
      } else {
        i += '>&|'.includes(src[i + 1]) && src[i + 1] !== undefined ? 2 : 1;
      }
      dropNextWord = true;
    } else {
      word = (word ?? '') + c;
      i++;
    }
  }
  endCommand();
  return items;
}

/** The command's words without keywords, assignments and wrappers (env, timeout); null if none. */
function commandWords(words) {
  const w = [...words];
  while (w.length) {
    if (SHELL_KEYWORDS.has(w[0]) || /^[A-Za-z_]\w*=/.test(w[0])) w.shift();
    else if (SHELL_WRAPPERS.has(w[0])) {
      if (w[0] === 'command' && w[1]?.startsWith('-')) return null; // command -v: a question
      w.shift();
      while (w[0]?.startsWith('-')) w.shift();
    } else if (w[0] === 'env') {
      w.shift();
      while (w.length && (w[0].startsWith('-') || /^[A-Za-z_]\w*=/.test(w[0]))) w.shift();
    } else if (w[0] === 'timeout') {
      w.shift();
      while (w[0]?.startsWith('-')) w.shift();
      w.shift(); // the duration
    } else break;
  }
  if (!w.length || SHELL_COMPOUND.has(w[0]) || /^[\w-]+\(\)$/.test(w[0])) return null;
  return w;
}

const isDynamic = (word) => word.includes('$') || word.includes('`');

// ---------------------------------------------------------------------------------------------
// Packages.

const packages = new Map();
function readPackage(dir) {
  if (!packages.has(dir)) {
    const file = path.join(dir, 'package.json');
    let json = null;
    if (existsSync(file)) {
      try {
        json = JSON.parse(readFileSync(file, 'utf8'));
      } catch (error) {
        json = { invalid: error.message };
      }
    }
    packages.set(dir, json);
  }
  return packages.get(dir);
}

/** The folder npm works in from `dir`: the nearest one with a package.json. */
function packageDirFrom(dir) {
  for (let at = dir; ; at = path.dirname(at)) {
    if (readPackage(at)) return at;
    if (at === path.dirname(at)) return null;
  }
}

/** The workspace folders of the package in `dir` (entries `folder` and `folder/*`). */
function workspaceDirs(dir) {
  const listed = readPackage(dir)?.workspaces;
  const patterns = Array.isArray(listed) ? listed : (listed?.packages ?? []);
  return patterns.flatMap((pattern) => {
    if (!pattern.endsWith('/*')) return [path.resolve(dir, pattern)];
    const parent = path.resolve(dir, pattern.slice(0, -2));
    if (!existsSync(parent)) return [];
    return readdirSync(parent, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => path.join(parent, entry.name));
  });
}

function isExecutable(file) {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Patterns of a .gitignore that name folders or files outright (no wildcards). */
function ignoredPaths(root) {
  const file = path.join(root, '.gitignore');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .map((line) => line.trim().replace(/^\//, '').replace(/\/$/, ''))
    .filter((line) => line && !/^[#!]/.test(line) && !/[*?[]/.test(line));
}

function distance(a, b) {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return row[b.length];
}

const suggestion = (name, names) => {
  const near = names.filter((n) => {
    const d = distance(name, n);
    return d <= 2 && d <= name.length / 2;
  });
  return near.length ? ` (did you mean ${near.map((n) => `"${n}"`).join(' or ')}?)` : '';
};

function npmCommand(word) {
  if (NPM_COMMANDS.includes(word)) return word;
  if (NPM_ALIASES[word]) return NPM_ALIASES[word];
  // npm also takes an unambiguous abbreviation.
  const names = [...NPM_COMMANDS, ...Object.keys(NPM_ALIASES)].filter((n) => n.startsWith(word));
  const resolved = new Set(names.map((n) => NPM_ALIASES[n] ?? n));
  return resolved.size === 1 ? [...resolved][0] : null;
}

// ---------------------------------------------------------------------------------------------
// Commands. `at` says where a command runs: { root, cwd (null: unknown), where (the job and
// step, for messages), chain (the scripts it is inside), job ({ installed }), report, visited }.

function shown(words) {
  const text = words.join(' ');
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

function relative(root, file) {
  const rel = path.relative(root, file);
  return rel === '' ? '.' : rel.startsWith('..') ? file : rel.split(path.sep).join('/');
}

/** Runs a shell script's commands through `checkCommand`; returns how many there were. */
function checkScript(source, at) {
  let count = 0;
  const cwds = [];
  let cwd = at.cwd;
  for (const item of parseShell(source)) {
    if (item.type === 'open') cwds.push(cwd);
    else if (item.type === 'close') cwd = cwds.length ? cwds.pop() : cwd;
    else {
      const words = commandWords(item.words);
      if (!words) continue;
      count++;
      if (words[0] === 'cd') {
        const target = words[1];
        cwd =
          cwd === null || !target || isDynamic(target) || /^[~-]/.test(target)
            ? null
            : path.resolve(cwd, target);
      } else checkCommand(words, { ...at, cwd, command: at.command ?? words });
    }
  }
  return count;
}

function checkCommand(words, at) {
  const inner = at.chain.length ? ` runs \`${shown(words)}\`` : '';
  const fail = (message) =>
    at.report(`${at.where}: \`${shown(at.command)}\`${at.chain.join('')}${inner}: ${message}`);
  const [name, ...args] = words;
  if (isDynamic(name)) return;
  if (name === 'npm') return checkNpm(args, at, fail);
  if (name === 'npx') return checkNpx(args, at, fail);
  if (name === 'node') return checkNode(args, at, fail);
  if (at.cwd === null) return;
  if (name.includes('/')) {
    const file = path.resolve(at.cwd, name);
    if (!existsSync(file) && !isBuilt(file, at)) fail(`${relative(at.root, file)} does not exist`);
    return;
  }
  if (!at.chain.length) return; // in a step: the runner's tools (docker, ...) are not all here
  const binDirs = [];
  for (let dir = at.cwd; ; dir = path.dirname(dir)) {
    binDirs.push(path.join(dir, 'node_modules', '.bin'));
    if (dir === path.dirname(dir)) break;
  }
  const searched = [...binDirs, ...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean)];
  if (SHELL_BUILTINS.has(name) || searched.some((dir) => isExecutable(path.join(dir, name)))) {
    return;
  }
  fail(`"${name}" is not in node_modules/.bin, a shell builtin or on PATH`);
}

function isBuilt(file, at) {
  const rel = path.relative(at.root, file).split(path.sep).join('/');
  return ignoredPaths(at.root).some((ignored) => rel === ignored || rel.startsWith(`${ignored}/`));
}

function checkNode(args, at, fail) {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (/^(-e|--eval|-p|--print|-v|--version|-h|--help)$/.test(arg)) return;
    if (/^(-r|--require|--import|--loader|--experimental-loader)$/.test(arg)) i++;
    else if (!arg.startsWith('-')) {
      if (isDynamic(arg) || at.cwd === null) return;
      const file = path.resolve(at.cwd, arg);
      if (!existsSync(file) && !isBuilt(file, at)) {
        fail(`${relative(at.root, file)} does not exist`);
      }
      return;
    }
  }
}

function checkNpx(args, at, fail) {
  let i = 0;
  for (; i < args.length && args[i].startsWith('-'); i++) {
    // A package named on the command line, or a shell string: npx fetches or runs it as asked.
    if (/^(-p|--package|-c|--call)(=|$)/.test(args[i])) return;
    if (args[i] === '--') {
      i++;
      break;
    }
  }
  const bin = args[i];
  if (!bin) return fail('npx without a command');
  if (!at.chain.length && !at.job.installed) {
    fail('runs before the job installs its dependencies (npm ci)');
  }
  if (isDynamic(bin) || at.cwd === null) return;
  if (bin.includes('/')) {
    if (!existsSync(path.resolve(at.cwd, bin))) fail(`${bin} does not exist`);
    return;
  }
  if (bin.lastIndexOf('@') > 0) return; // `tool@version`: a download, on purpose
  const dir = packageDirFrom(at.cwd);
  const binDir = path.join(dir ?? at.cwd, 'node_modules', '.bin');
  if (!existsSync(path.join(binDir, bin))) {
    fail(`no "${bin}" in ${relative(at.root, binDir)}: npx would download a package of that name`);
  }
}

function checkNpm(args, at, fail) {
  const options = new Map();
  const positional = [];
  let afterDashes = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '--') {
      afterDashes = args.slice(i + 1);
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      positional.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const key = eq > 0 ? arg.slice(0, eq) : arg;
    const value = eq > 0 ? arg.slice(eq + 1) : NPM_VALUE_OPTIONS.has(key) ? args[++i] : true;
    options.set(NPM_OPTION_ALIASES[key] ?? key, value);
  }
  const [word, ...commandArgs] = positional;
  if (!word) return fail('npm without a command');
  if (isDynamic(word)) return;
  const command = npmCommand(word);
  if (!command) return fail(`"${word}" is not an npm command${suggestion(word, NPM_COMMANDS)}`);
  if (!at.chain.length) {
    if (NEEDS_INSTALL.has(command) && !at.job.installed) {
      fail('runs before the job installs its dependencies (npm ci)');
    }
    if (INSTALLS.has(command)) at.job.installed = true;
  }
  if (at.cwd === null) return;

  const prefix = options.get('--prefix');
  if (typeof prefix === 'string' && isDynamic(prefix)) return;
  const base = typeof prefix === 'string' ? path.resolve(at.cwd, prefix) : at.cwd;
  const rootDir = typeof prefix === 'string' ? base : packageDirFrom(base);
  if (!rootDir || !readPackage(rootDir)) {
    return fail(`no package.json in ${relative(at.root, base)}${prefix ? '' : ' or above'}`);
  }
  if (readPackage(rootDir).invalid) {
    return fail(`${relative(at.root, path.join(rootDir, 'package.json'))} does not parse`);
  }
  let dirs = [rootDir];
  const workspace = options.get('--workspace');
  if (typeof workspace === 'string') {
    if (isDynamic(workspace)) return;
    const byPath = path.resolve(rootDir, workspace);
    const found = workspaceDirs(rootDir).find(
      (dir) => dir === byPath || readPackage(dir)?.name === workspace,
    );
    if (!found) return fail(`no workspace "${workspace}" in ${relative(at.root, rootDir)}`);
    dirs = [found];
  } else if (options.has('--workspaces')) dirs = workspaceDirs(rootDir);

  const scriptIn = (dir, script) => {
    const scripts = readPackage(dir)?.scripts ?? {};
    return Object.hasOwn(scripts, script) ? scripts[script] : undefined;
  };
  const runScript = (dir, script) => {
    const key = `${dir}\0${script}`;
    if (at.visited.has(key)) return;
    at.visited.add(key);
    checkScript(scriptIn(dir, script), {
      ...at,
      cwd: dir,
      chain: [...at.chain, ` → script "${script}"`],
    });
  };
  const packageJson = (dir) => relative(at.root, path.join(dir, 'package.json'));

  if (command === 'ci' || command === 'install-ci-test') {
    const locks = ['package-lock.json', 'npm-shrinkwrap.json'];
    if (!locks.some((lock) => existsSync(path.join(rootDir, lock)))) {
      fail(`npm ci needs a package-lock.json in ${relative(at.root, rootDir)}`);
    }
    if (commandArgs.length) {
      fail(`npm ci installs the lockfile and takes no package names (${commandArgs.join(' ')})`);
    }
  }
  if (command === 'run') {
    const [script] = commandArgs;
    if (!script || isDynamic(script)) return; // `npm run` alone lists the scripts
    for (const dir of dirs) {
      if (scriptIn(dir, script) !== undefined) runScript(dir, script);
      else if (!options.has('--if-present')) {
        const names = Object.keys(readPackage(dir)?.scripts ?? {});
        fail(`no script "${script}" in ${packageJson(dir)}${suggestion(script, names)}`);
      }
    }
  }
  const script = LIFECYCLE_SCRIPTS[command];
  if (script) {
    for (const dir of dirs) {
      const body = scriptIn(dir, script);
      if (body === undefined) {
        if (script === 'start' && existsSync(path.join(dir, 'server.js'))) continue;
        fail(`npm ${script} needs a "${script}" script in ${packageJson(dir)}`);
      } else if (/no test specified/.test(body)) {
        fail(`the "test" script of ${packageJson(dir)} is npm init's placeholder`);
      } else runScript(dir, script);
    }
  }
  if (command === 'exec') {
    const rest = afterDashes.length ? afterDashes : commandArgs;
    if (options.has('--package') || options.has('--call')) return;
    if (!rest.length) return fail('npm exec without a command');
    checkNpx(rest, { ...at, job: { installed: true } }, fail);
  }
}

// ---------------------------------------------------------------------------------------------
// Workflows.

/** Every string in `value`, with its path of keys. */
function* strings(value, at = []) {
  if (typeof value === 'string') {
    yield [value, at];
  } else if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      yield* strings(item, [...at, Array.isArray(value) ? Number(key) : key]);
    }
  }
}

const isMapping = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);

function stepLabel(step, index) {
  const name = isMapping(step)
    ? (step.name ??
      step.uses ??
      (typeof step.run === 'string' ? step.run.trim().split('\n')[0] : ''))
    : '';
  const text = String(name);
  return `step ${index + 1}${text ? ` "${text.length > 60 ? `${text.slice(0, 57)}...` : text}"` : ''}`;
}

/** The keys of a job's matrix; null without one; 'dynamic' for a `${{ }}` matrix. */
function matrixKeys(job) {
  const matrix = job.strategy?.matrix;
  if (matrix === undefined) return null;
  if (!isMapping(matrix)) return 'dynamic';
  const keys = new Set(Object.keys(matrix).filter((key) => key !== 'include' && key !== 'exclude'));
  if (!Array.isArray(matrix.include)) return matrix.include === undefined ? keys : 'dynamic';
  for (const entry of matrix.include.filter(isMapping)) {
    for (const key of Object.keys(entry)) keys.add(key);
  }
  return keys;
}

export function checkWorkflow(file, text, root) {
  const name = path.basename(file);
  const problems = [];
  const report = (message) => problems.push(`${name}: ${message}`);
  const result = { name, problems, jobs: 0, steps: 0, commands: 0 };

  const doc = YAML.parseDocument(text, { prettyErrors: true, merge: true });
  if (doc.errors.length) {
    for (const error of doc.errors) report(`invalid YAML: ${error.message.split('\n')[0]}`);
    return result;
  }
  const workflow = doc.toJS();
  if (!isMapping(workflow)) return (report('not a mapping of workflow keys'), result);
  if (workflow.on === undefined) report('no "on": nothing triggers it');
  if (!isMapping(workflow.jobs) || !Object.keys(workflow.jobs).length) {
    return (report('no jobs'), result);
  }
  const jobIds = Object.keys(workflow.jobs);
  const visited = new Set();
  for (const [id, job] of Object.entries(workflow.jobs)) {
    result.jobs++;
    const where = `job "${id}"`;
    if (!isMapping(job)) {
      report(`${where}: not a mapping`);
      continue;
    }
    for (const need of [job.needs ?? []].flat()) {
      if (!jobIds.includes(need)) report(`${where}: needs "${need}", which is not a job here`);
    }

    const keys = matrixKeys(job);
    if (keys instanceof Set) {
      for (const entry of [job.strategy.matrix.exclude ?? []].flat()) {
        for (const key of isMapping(entry) ? Object.keys(entry) : []) {
          if (!keys.has(key))
            report(`${where}: strategy.matrix.exclude names "${key}", not a matrix key`);
        }
      }
    }
    const { matrix: _matrix, ...strategy } = job.strategy ?? {};
    for (const [value, keyPath] of strings({ ...job, strategy })) {
      const expressions =
        keyPath[keyPath.length - 1] === 'if' && !value.includes('${{')
          ? [value]
          : [...value.matchAll(/\$\{\{([\s\S]*?)\}\}/g)].map((m) => m[1]);
      for (const expression of expressions) {
        const refs = expression.matchAll(
          /(?<![\w.])matrix\s*(?:\.\s*([A-Za-z_][\w-]*)|\[\s*['"]([^'"]+)['"]\s*\])/g,
        );
        for (const ref of refs) {
          const key = ref[1] ?? ref[2];
          if (keys === 'dynamic' || (keys && keys.has(key))) continue;
          const place =
            keyPath[0] === 'steps'
              ? `${stepLabel(job.steps[keyPath[1]], keyPath[1])} (${keyPath.slice(2).join('.')})`
              : `(${keyPath.join('.')})`;
          const known = keys
            ? `its matrix has ${[...keys].join(', ') || 'no keys'}`
            : 'it has no matrix';
          report(
            `${where}, ${place}: \${{ matrix.${key} }} is not a key of the job's matrix: ${known}`,
          );
        }
      }
    }

    if (job.uses !== undefined) continue; // a reusable workflow: its own jobs have the steps
    if (job['runs-on'] === undefined) report(`${where}: no "runs-on"`);
    if (!Array.isArray(job.steps) || !job.steps.length) {
      report(`${where}: no steps`);
      continue;
    }
    const defaults = { ...workflow.defaults?.run, ...job.defaults?.run };
    const state = { installed: false };
    for (const [index, step] of job.steps.entries()) {
      result.steps++;
      const at = `${where}, ${stepLabel(step, index)}`;
      if (!isMapping(step)) {
        report(`${at}: not a mapping`);
        continue;
      }
      const hasUses = step.uses !== undefined;
      const hasRun = step.run !== undefined;
      if (!hasUses && !hasRun) report(`${at}: has neither "uses" nor "run"`);
      if (hasUses && hasRun) report(`${at}: has both "uses" and "run"`);
      if (hasUses) {
        const uses = String(step.uses);
        if (!/^(\.\/|docker:\/\/)/.test(uses) && !/^[^/@\s]+\/[^@\s]+@[^@\s]+$/.test(uses)) {
          report(`${at}: uses "${uses}" needs the form owner/repo@ref`);
        }
        if (/install|cache/i.test(uses)) state.installed = true;
      }
      if (!hasRun) continue;
      if (typeof step.run !== 'string') {
        report(`${at}: "run" is not a string`);
        continue;
      }
      const shell = String(step.shell ?? defaults.shell ?? 'bash').split(/\s/)[0];
      if (shell !== 'bash' && shell !== 'sh') continue;
      const workingDirectory = String(
        step['working-directory'] ?? defaults['working-directory'] ?? '.',
      );
      result.commands += checkScript(step.run, {
        root,
        cwd: isDynamic(workingDirectory) ? null : path.resolve(root, workingDirectory),
        where: at,
        chain: [],
        job: state,
        report,
        visited,
      });
    }
  }
  return result;
}

function main() {
  const args = process.argv.slice(2);
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write('usage: node .ci/check-workflow.mjs [WORKFLOW_DIR [PACKAGE_ROOT]]\n');
    return 0;
  }
  const root = path.resolve(args[1] ?? repoRoot);
  const dir = path.resolve(args[0] ?? path.join(repoRoot, '.github', 'workflows'));
  const files = existsSync(dir)
    ? readdirSync(dir)
        .filter((f) => /\.ya?ml$/.test(f))
        .sort()
    : [];
  if (!files.length) {
    process.stderr.write(`check-workflow: no workflow (*.yml, *.yaml) in ${dir}\n`);
    return 1;
  }
  let problems = 0;
  for (const file of files) {
    const full = path.join(dir, file);
    const result = checkWorkflow(full, readFileSync(full, 'utf8'), root);
    if (result.problems.length) {
      problems += result.problems.length;
      for (const problem of result.problems) process.stderr.write(`${problem}\n`);
    } else {
      process.stdout.write(
        `${file}: ${result.jobs} jobs, ${result.steps} steps, ${result.commands} commands checked\n`,
      );
    }
  }
  if (problems) {
    process.stderr.write(
      `check-workflow: ${problems} problem${problems > 1 ? 's' : ''} in ${dir}\n`,
    );
  }
  return problems ? 1 : 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main();
}
