// shutdownGraceMs bounds a locked HTTP handler: Nest closes the HTTP server (which waits for
// the requests in flight) before the module's shutdown hook runs, so the grace period's end
// must answer the request itself. A real process gets SIGTERM, on Express and Fastify.
import { spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { TS_CHILD_FLAGS } from '@nestjs-mongo-lock/process-harness';

jest.setTimeout(60_000);

const shutdownGraceMs = 1_000;

let mongo: TestMongo;
beforeAll(async () => {
  mongo = await startTestMongo();
});
afterAll(async () => {
  await mongo.stop();
});

function get(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe.each(['express', 'fastify'])('shutdown grace on %s', (platform) => {
  it('a 10 s locked handler is told at the end of shutdownGraceMs, answered 503, and the app exits', async () => {
    const child = spawn(
      process.execPath,
      [...TS_CHILD_FLAGS, join(__dirname, 'fixtures/http-shutdown-child.ts'), platform],
      {
        cwd: join(__dirname, '../..'),
        env: { ...process.env, MONGODB_URI: mongo.uri, MONGODB_DB: mongo.dbName },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    try {
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const lines: string[] = [];
      const waiters: [(line: string) => boolean, (line: string) => void][] = [];
      createInterface({ input: child.stdout }).on('line', (line) => {
        lines.push(line);
        for (const [i, [matches, resolve]] of waiters.entries()) {
          if (matches(line)) {
            waiters.splice(i, 1);
            resolve(line);
            break;
          }
        }
      });
      const exited = new Promise<number>((resolve) =>
        child.on('exit', () => resolve(performance.now())),
      );
      const line = (prefix: string) =>
        Promise.race([
          new Promise<string>((resolve) => {
            const seen = lines.find((l) => l.startsWith(prefix));
            if (seen) resolve(seen);
            else waiters.push([(l) => l.startsWith(prefix), resolve]);
          }),
          exited.then(() => {
            throw new Error(`child exited before "${prefix}": ${stderr}`);
          }),
        ]);

      const port = Number((await line('ready')).split(' ')[1]);
      const response = get(port, '/slow');
      await line('handling');
      const sigtermAt = performance.now();
      child.kill('SIGTERM');

      await line('aborted');
      const abortedAfterMs = performance.now() - sigtermAt;
      const answer = await response;
      const exitedAfterMs = (await exited) - sigtermAt;

      // Told at the end of the grace period, not before and not at the handler's end.
      expect(abortedAfterMs).toBeGreaterThanOrEqual(shutdownGraceMs);
      expect(abortedAfterMs).toBeLessThan(shutdownGraceMs + LOAD_SLACK_MS);
      expect(answer.status).toBe(503);
      // About 3 s by the README; the handler alone would have taken 10 s, over this bound.
      expect(exitedAfterMs).toBeLessThan(3_000 + LOAD_SLACK_MS);
      expect(lines).not.toContain('answered');
    } finally {
      child.kill('SIGKILL');
    }
  });
});
