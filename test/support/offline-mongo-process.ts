import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { TS_CHILD_FLAGS } from '@nestjs-mongo-lock/process-harness';

export interface OfflineMongoProcess {
  uri: string;
  pid: number;
  /** Sends `signal` to the server process, e.g. SIGSTOP / SIGCONT to make it stop answering for a while. */
  signal(signal: NodeJS.Signals): void;
  /** SIGKILL, as a crash would: resolves once the process has exited (its port is free again). */
  kill(): Promise<void>;
  stop(): Promise<void>;
}

const repoRoot = path.resolve(__dirname, '../..');
/** A server that has not printed its URI by then is stuck (ts-node on a loaded machine takes seconds). */
const startTimeoutMs = 60_000;

export interface OfflineMongoProcessOptions {
  standalone?: boolean;
  ttlMonitorSleepSecs?: number;
  port?: number;
}

/**
 * The offline MongoDB test server in its own OS process (`packages/mongo-offline/cli.ts`), for
 * benchmarks and multi-process tests where the server must not share an event loop.
 */
export async function spawnOfflineMongo(
  options: OfflineMongoProcessOptions = {},
): Promise<OfflineMongoProcess> {
  const child = spawnServer(options, false);
  return handleOf(child, await firstLine(child, 'mongodb://'));
}

/** A server process loaded and waiting: `listen()` starts it (see {@link prepareOfflineMongo}). */
export interface PreparedOfflineMongo {
  /** Listens on the port it was prepared for; resolves once it accepts connections. */
  listen(): Promise<OfflineMongoProcess>;
  /** Ends the process if it never listened. */
  discard(): Promise<void>;
}

/**
 * Loads a server process ahead of time (ts-node takes seconds on a loaded machine) without
 * listening yet: `listen()` then starts it within milliseconds, e.g. on the port of a server
 * just killed, the way a restarted mongod comes back.
 */
export async function prepareOfflineMongo(
  options: OfflineMongoProcessOptions & { port: number },
): Promise<PreparedOfflineMongo> {
  const child = spawnServer(options, true);
  await firstLine(child, 'ready');
  return {
    listen: async () => {
      const uri = firstLine(child, 'mongodb://');
      child.stdin?.end('listen\n');
      return handleOf(child, await uri);
    },
    discard: () => kill(child),
  };
}

function spawnServer(options: OfflineMongoProcessOptions, deferred: boolean): ChildProcess {
  const args = [...TS_CHILD_FLAGS, 'packages/mongo-offline/cli.ts'];
  args.push('--port', String(options.port ?? 0));
  if (options.standalone) args.push('--standalone');
  if (options.ttlMonitorSleepSecs !== undefined) {
    args.push('--ttl-monitor-sleep-secs', String(options.ttlMonitorSleepSecs));
  }
  if (deferred) args.push('--listen-on-stdin');
  const child = spawn(process.execPath, args, {
    cwd: repoRoot,
    stdio: [deferred ? 'pipe' : 'ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  stderrOf.set(child, () => stderr);
  return child;
}

const stderrOf = new WeakMap<ChildProcess, () => string>();

function handleOf(child: ChildProcess, uri: string): OfflineMongoProcess {
  return {
    uri,
    pid: child.pid ?? -1,
    signal: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
    kill: () => kill(child),
    stop: () => stop(child),
  };
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

/** The next line the server prints, which must start with `prefix`. */
async function firstLine(child: ChildProcess, prefix: string): Promise<string> {
  const lines = createInterface({ input: child.stdout! });
  const timer = setTimeout(() => child.kill('SIGKILL'), startTimeoutMs);
  try {
    const line = await Promise.race([
      once(lines, 'line').then(([value]) => String(value).trim()),
      once(child, 'exit').then(([code]) => {
        throw new Error(
          `offline MongoDB exited (${String(code)}) before printing ${prefix}:\n` +
            (stderrOf.get(child)?.() ?? ''),
        );
      }),
    ]);
    if (!line.startsWith(prefix)) throw new Error(`unexpected line: ${line}`);
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
