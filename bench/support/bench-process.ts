import { fork, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import type { OpMap } from '../../packages/process-harness/ipc';

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

function nodeArgs(flags: string[] = []): { execArgv: string[]; env: NodeJS.ProcessEnv } {
  if (compiled) return { execArgv: flags, env: { ...process.env } };
  return {
    execArgv: [...flags, '-r', 'ts-node/register/transpile-only'],
    env: { ...process.env, TS_NODE_PROJECT: path.join(repoRoot, 'tsconfig.jest.json') },
  };
}

type Reply =
  | { type: 'reply'; id: number; ok: true; result: unknown }
  | { type: 'reply'; id: number; ok: false; error: string; errorName: string };

/**
 * A benchmark child process answering typed calls over IPC (the child side is
 * `serveIpc` of packages/process-harness/ipc.ts), started from compiled JS when the run is compiled.
 */
export class BenchChild<Ops extends OpMap> {
  readonly exited: Promise<void>;
  private readonly pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void }
  >();
  private nextId = 1;
  private readonly child: ChildProcess;

  constructor(
    sourcePath: string,
    readonly label: string,
    nodeFlags: string[] = [],
  ) {
    const { execArgv, env } = nodeArgs(nodeFlags);
    this.child = fork(entryFor(sourcePath), [], {
      cwd: repoRoot,
      execArgv,
      env,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child.on('message', (message: Reply | { type: 'event' }) => {
      if (message.type !== 'reply') return;
      const call = this.pending.get(message.id);
      this.pending.delete(message.id);
      if (!call) return;
      if (message.ok) call.resolve(message.result);
      else call.reject(new Error(`${label}: ${message.error}`));
    });
    this.exited = once(this.child, 'exit').then(() => {
      for (const call of this.pending.values()) call.reject(new Error(`${label} exited`));
      this.pending.clear();
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  call<K extends keyof Ops & string>(op: K, args: Ops[K][0]): Promise<Ops[K][1]> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ id, op, args }, (error) => {
        if (!error) return;
        this.pending.delete(id);
        reject(error);
      });
    });
  }

  /** Runs `closeOp` if the child still answers (5 s at most), then makes sure it is gone. */
  async stop(closeOp?: keyof Ops & string): Promise<void> {
    const alive = () => this.child.exitCode === null && this.child.signalCode === null;
    if (alive() && closeOp) {
      let giveUp: NodeJS.Timeout | undefined;
      await Promise.race([
        this.call(closeOp, {}).catch(() => undefined),
        new Promise((resolve) => (giveUp = setTimeout(resolve, 5000))),
      ]);
      clearTimeout(giveUp);
    }
    if (this.child.connected) this.child.disconnect();
    const timer = setTimeout(() => alive() && this.child.kill('SIGKILL'), 3000);
    await this.exited;
    clearTimeout(timer);
  }
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
