import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { createInterface } from 'node:readline';

/**
 * `npm run bench` compiles the benchmarks to `.bench-build/` (tsconfig.bench.json) and runs
 * them with plain `node`, so that no process pays ts-node's compile time and memory during a
 * measurement. Run directly through ts-node (`ts-node bench/run.ts`) they still work: child
 * processes then go through ts-node as well.
 */
export const compiled = path.extname(__filename) === '.js';

/** The repository root (the directory with package.json), from the sources or the build. */
export const repoRoot = ((): string => {
  let dir = __dirname;
  while (!existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`no package.json above ${__dirname}`);
    dir = parent;
  }
  return dir;
})();

/** Where `bench/...` or `packages/...` sources run from: the build folder when compiled. */
const codeRoot = compiled ? path.resolve(__dirname, '../..') : repoRoot;

/** The runnable file for a source path relative to the repository, e.g. `bench/worker.ts`. */
export function entryFor(sourcePath: string): string {
  const file = path.join(codeRoot, sourcePath);
  return compiled ? file.replace(/\.ts$/, '.js') : file;
}

export function nodeArgs(flags: string[] = []): { execArgv: string[]; env: NodeJS.ProcessEnv } {
  if (compiled) return { execArgv: flags, env: { ...process.env } };
  return {
    execArgv: [...flags, '-r', 'ts-node/register/transpile-only'],
    env: { ...process.env, TS_NODE_PROJECT: path.join(repoRoot, 'tsconfig.jest.json') },
  };
}

export interface BenchServer {
  uri: string;
  /** `'uri'`: MONGODB_URI, a real deployment; `'offline'`: the test server in its own process. */
  kind: 'uri' | 'offline';
  /** The server's pid when it is ours (its CPU time is then counted), else undefined. */
  pid?: number;
  stop(): Promise<void>;
}

/**
 * MONGODB_URI if set, else the offline MongoDB test server (packages/mongo-offline/cli.ts) in its
 * own process, compiled like the rest of the run.
 */
export async function startBenchServer(): Promise<BenchServer> {
  if (process.env.MONGODB_URI) {
    return { uri: process.env.MONGODB_URI, kind: 'uri', stop: async () => undefined };
  }
  const { execArgv, env } = nodeArgs();
  const child = spawn(
    process.execPath,
    [...execArgv, entryFor('packages/mongo-offline/cli.ts'), '--port', '0'],
    { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const uri = await firstLine(child);
  return { uri, kind: 'offline', pid: child.pid, stop: () => stopServer(child) };
}

async function firstLine(child: ChildProcess): Promise<string> {
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const lines = createInterface({ input: child.stdout! });
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  try {
    const line = await Promise.race([
      once(lines, 'line').then(([value]) => String(value).trim()),
      once(child, 'exit').then(([code]) => {
        throw new Error(`offline MongoDB exited (${String(code)}) before its URI:\n${stderr}`);
      }),
    ]);
    if (!line.startsWith('mongodb://')) throw new Error(`unexpected first line: ${line}`);
    lines.close();
    child.stdout?.resume();
    return line;
  } finally {
    clearTimeout(timer);
  }
}

async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

/**
 * CPU time (user + system) of a local process in µs, from /proc/<pid>/stat (Linux, clock
 * ticks of 10 ms); undefined where that cannot be read.
 */
export function processCpuMicros(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return undefined;
  }
}

/** `uri` with its path set to `dbName` (mongodash takes the database from the URI). */
export function uriWithDatabase(uri: string, dbName: string): string {
  const url = new URL(uri);
  url.pathname = `/${dbName}`;
  return url.toString();
}
