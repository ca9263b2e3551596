import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import * as path from 'node:path';
import { createInterface } from 'node:readline';

export interface FaultServer {
  uri: string;
  /** `'uri'`: MONGODB_URI, a real deployment; `'offline'`: the test server in its own process. */
  kind: 'uri' | 'offline';
  stop(): Promise<void>;
}

const repoRoot = path.resolve(__dirname, '../..');
const startTimeoutMs = 60_000;

/**
 * One server that every process of a scenario shares. The offline server runs in its own
 * process so that pausing or killing a worker, or the test process's own load, never stops it.
 */
export async function startFaultServer(
  options: { standalone?: boolean } = {},
): Promise<FaultServer> {
  const fromEnv = process.env.MONGODB_URI;
  if (fromEnv && !options.standalone) {
    return { uri: fromEnv, kind: 'uri', stop: async () => undefined };
  }
  const args = [
    '-r',
    'ts-node/register/transpile-only',
    'test/mongo-offline/cli.ts',
    '--port',
    '0',
  ];
  if (options.standalone) args.push('--standalone');
  const child = spawn(process.execPath, args, {
    cwd: repoRoot,
    env: { ...process.env, TS_NODE_PROJECT: path.join(repoRoot, 'tsconfig.jest.json') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const uri = await readFirstLine(child);
  return { uri, kind: 'offline', stop: () => stopChild(child) };
}

async function readFirstLine(child: ChildProcess): Promise<string> {
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const lines = createInterface({ input: child.stdout! });
  const timer = setTimeout(() => child.kill('SIGKILL'), startTimeoutMs);
  try {
    const first = await Promise.race([
      once(lines, 'line').then(([line]) => String(line).trim()),
      once(child, 'exit').then(([code]) => {
        throw new Error(
          `offline MongoDB exited (${String(code)}) before printing its URI:\n${stderr}`,
        );
      }),
    ]);
    if (!first.startsWith('mongodb://')) throw new Error(`unexpected first line: ${first}`);
    // Keep draining its output so a chatty server never blocks on a full pipe, without
    // holding the test process open.
    lines.close();
    child.stdout?.resume();
    return first;
  } finally {
    clearTimeout(timer);
  }
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}
