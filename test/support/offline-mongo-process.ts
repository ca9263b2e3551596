import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import * as path from 'node:path';
import { createInterface } from 'node:readline';

export interface OfflineMongoProcess {
  uri: string;
  pid: number;
  /** Sends `signal` to the server process, e.g. SIGSTOP / SIGCONT to make it stop answering for a while. */
  signal(signal: NodeJS.Signals): void;
  stop(): Promise<void>;
}

const repoRoot = path.resolve(__dirname, '../..');
/** A server that has not printed its URI by then is stuck (ts-node on a loaded machine takes seconds). */
const startTimeoutMs = 60_000;

/**
 * The offline MongoDB test server in its own OS process (`test/mongo-offline/cli.ts`), for
 * benchmarks and multi-process tests where the server must not share an event loop.
 */
export async function spawnOfflineMongo(
  options: { standalone?: boolean; ttlMonitorSleepSecs?: number; port?: number } = {},
): Promise<OfflineMongoProcess> {
  const args = ['-r', 'ts-node/register/transpile-only', 'test/mongo-offline/cli.ts'];
  args.push('--port', String(options.port ?? 0));
  if (options.standalone) args.push('--standalone');
  if (options.ttlMonitorSleepSecs !== undefined) {
    args.push('--ttl-monitor-sleep-secs', String(options.ttlMonitorSleepSecs));
  }
  const child = spawn(process.execPath, args, {
    cwd: repoRoot,
    env: { ...process.env, TS_NODE_PROJECT: path.join(repoRoot, 'tsconfig.jest.json') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const uri = await firstLine(child);
  return {
    uri,
    pid: child.pid ?? -1,
    signal: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
    stop: () => stop(child),
  };
}

async function firstLine(child: ChildProcess): Promise<string> {
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const lines = createInterface({ input: child.stdout! });
  const timer = setTimeout(() => child.kill('SIGKILL'), startTimeoutMs);
  try {
    const line = await Promise.race([
      once(lines, 'line').then(([value]) => String(value).trim()),
      once(child, 'exit').then(([code]) => {
        throw new Error(
          `offline MongoDB exited (${String(code)}) before printing its URI:\n${stderr}`,
        );
      }),
    ]);
    if (!line.startsWith('mongodb://')) throw new Error(`unexpected first line: ${line}`);
    // Keep draining its output so a chatty server never blocks on a full pipe, without
    // holding the parent process open.
    lines.close();
    child.stdout?.resume();
    return line;
  } finally {
    clearTimeout(timer);
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  // A server left frozen (SIGSTOP) would never act on SIGTERM.
  child.kill('SIGCONT');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}
