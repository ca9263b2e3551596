// Jest declares its tests synchronously, but whether a spec test runs depends on the server
// (version, topology, kind). This learns them before declaring, from a short-lived child process
// that starts the same fixture.
import { EJSON } from 'bson';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import type { ServerInfo } from './server-info';
import { TS_CHILD_FLAGS } from '@nestjs-mongo-lock/process-harness';

export type ProbeResult = { info: ServerInfo } | { error: string };

export function probeServerSync(timeoutMs = 120_000): ProbeResult {
  const main = join(__dirname, 'probe-server-main.ts');
  try {
    const stdout = execFileSync(process.execPath, [...TS_CHILD_FLAGS, main], {
      encoding: 'utf8',
      timeout: timeoutMs,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lastLine = stdout.trim().split('\n').pop() ?? '';
    return { info: EJSON.parse(lastLine) as ServerInfo };
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr;
    return { error: `Could not probe the test server: ${stderr || (error as Error).message}` };
  }
}
