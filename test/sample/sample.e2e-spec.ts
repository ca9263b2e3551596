import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { join } from 'node:path';
import { startTestMongo, type TestMongo } from '../support/mongo';

jest.setTimeout(120_000);

interface RunningSample {
  child: ChildProcessWithoutNullStreams;
  baseUrl: string;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Boots `sample/main.ts` as `npm run sample` does, on a free port. */
async function bootSample(env: NodeJS.ProcessEnv): Promise<RunningSample> {
  const child = spawn(
    process.execPath,
    ['-r', 'ts-node/register/transpile-only', 'sample/main.ts'],
    {
      cwd: join(__dirname, '../..'),
      env: {
        ...env,
        PORT: '0',
        NO_COLOR: '1',
        SAMPLE_PAYMENT_MS: '1500',
        SAMPLE_DIGEST_CRON: '* * * * * *',
      },
    },
  );
  let output = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const baseUrl = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /Listening on (http:\/\/[^\s)]+)/.exec(output);
      if (match && output.includes('MongoDB: ')) resolve(match[1]);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    void exited.then(() => reject(new Error(`sample exited early:\n${output}`)));
  });
  return { child, baseUrl, output: () => output, exited };
}

function stop(sample: RunningSample | undefined): void {
  if (sample && sample.child.exitCode === null && sample.child.signalCode === null) {
    sample.child.kill('SIGKILL');
  }
}

describe('the sample application on MONGODB_URI', () => {
  let mongo: TestMongo;
  let sample: RunningSample;
  const url = (path: string) => `${sample.baseUrl}${path}`;
  const lockState = async (key: string) =>
    (await (await fetch(url(`/locks/${key}`))).json()) as { held: boolean };

  beforeAll(async () => {
    mongo = await startTestMongo();
    sample = await bootSample({ ...process.env, MONGODB_URI: mongo.uri, MONGODB_DB: mongo.dbName });
  });

  afterAll(async () => {
    stop(sample);
    await mongo?.stop();
  });

  it('prints which MongoDB it uses', () => {
    expect(sample.output()).toMatch(/MongoDB: MONGODB_URI mongodb:\/\//);
  });

  it('pays an order once; a concurrent payment gets 423 with Retry-After', async () => {
    const first = fetch(url('/orders/42/pay'), { method: 'POST' });
    await waitUntil(async () => (await lockState('order:42')).held);
    const second = await fetch(url('/orders/42/pay'), { method: 'POST' });
    expect(second.status).toBe(423);
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const paid = await first;
    expect(paid.status).toBe(200);
    expect(await paid.json()).toMatchObject({ id: '42', status: 'paid' });
    expect((await lockState('order:42')).held).toBe(false);
    const again = await fetch(url('/orders/42/pay'), { method: 'POST' });
    expect(again.status).toBe(409);
    // A key the lock cannot take (NUL) is the client's error, and nothing is locked.
    const badKey = await fetch(url('/orders/a%00b/pay'), { method: 'POST' });
    expect(badKey.status).toBe(400);
    expect(await badKey.json()).toMatchObject({ statusCode: 400, error: 'Bad Request' });
  });

  it('ships through a @Locked provider method', async () => {
    await fetch(url('/orders/7/pay'), { method: 'POST' });
    const shipped = await fetch(url('/orders/7/ship'), { method: 'POST' });
    expect(shipped.status).toBe(200);
    expect(await shipped.json()).toMatchObject({ id: '7', status: 'shipped' });
  });

  it('deposits under a document lock with a fenced commit, creating the account first', async () => {
    const deposit = (amount: unknown) =>
      fetch(url('/accounts/acc-1/deposit'), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ amount }),
      });
    const first = await deposit(10);
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ _id: 'acc-1', balance: 10, version: 1 });
    expect(first.headers.get('etag')).toBe('"1"');
    // Concurrent deposits wait for each other's lock: none is lost.
    const statuses = await Promise.all([1, 2, 3, 4].map(() => deposit(5).then((r) => r.status)));
    expect(statuses).toEqual([200, 200, 200, 200]);
    const last = await deposit(1);
    expect(await last.json()).toMatchObject({ balance: 31, version: 6 });
    expect((await deposit(-1)).status).toBe(400);
  });

  it('renames with If-Match: 412 for a stale ETag, 428 without one', async () => {
    const created = await fetch(url('/accounts/acc-2/deposit'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ amount: 1 }),
    });
    const etag = created.headers.get('etag') as string;
    const rename = (ifMatch: string | undefined) =>
      fetch(url('/accounts/acc-2/nickname'), {
        method: 'PUT',
        headers: {
          'content-type': 'application/json',
          ...(ifMatch ? { 'if-match': ifMatch } : {}),
        },
        body: JSON.stringify({ nickname: 'savings' }),
      });
    const renamed = await rename(etag);
    expect(renamed.status).toBe(200);
    expect(await renamed.json()).toMatchObject({ nickname: 'savings', version: 2 });
    expect(renamed.headers.get('etag')).toBe('"2"');
    expect((await rename(etag)).status).toBe(412);
    expect((await rename(undefined)).status).toBe(428);
  });

  it('streams lock events over SSE', async () => {
    const controller = new AbortController();
    const events = await fetch(url('/locks/events'), { signal: controller.signal });
    expect(events.headers.get('content-type')).toContain('text/event-stream');
    const reader = events.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const pay = fetch(url('/orders/99/pay'), { method: 'POST' });
    while (!text.includes('"key":"order:99"')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    controller.abort();
    await reader.cancel().catch(() => undefined);
    expect(text).toMatch(/data: \{"type":"acquired","key":"order:99"/);
    await pay;
  });

  it('serves its OpenAPI document with the locked route', async () => {
    const response = await fetch(url('/docs-json'));
    const document = (await response.json()) as {
      paths: Record<string, { post?: { responses?: Record<string, unknown> } }>;
    };
    expect(document.paths['/orders/{id}/pay']?.post?.responses).toHaveProperty('423');
  });

  it('mounts the lock board read-only, showing who leads the digest', async () => {
    const page = await fetch(url('/board'));
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toMatch(/default-src 'none'/);
    // The only instance stands for `digest` from bootstrap and leads it.
    const leader = await fetch(url('/board/api/lock?key=nestjs-mongo-lock%3Aleader%3Adigest'));
    expect(((await leader.json()) as { held: boolean }).held).toBe(true);
    const release = await fetch(url('/board/api/lock/release?key=order%3A1'), { method: 'POST' });
    expect(release.status).toBe(404);
  });

  it('sends the digest as the leader, with the term fence', async () => {
    const endsAt = Date.now() + 15_000;
    while (!/Digest #1 sent by the leader \(term fence \d+\)/.test(sample.output())) {
      if (Date.now() > endsAt) throw new Error(`no digest sent:\n${sample.output()}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });

  it('stops cleanly on SIGTERM', async () => {
    sample.child.kill('SIGTERM');
    const exit = await sample.exited;
    expect(exit.signal === 'SIGTERM' || exit.code === 0).toBe(true);
    expect(sample.output()).toContain('Stopped on SIGTERM');
  });
});

describe('the sample application without MONGODB_URI', () => {
  let sample: RunningSample | undefined;

  afterAll(() => stop(sample));

  it('starts the embedded default and says so', async () => {
    const env = { ...process.env };
    delete env.MONGODB_URI;
    sample = await bootSample(env);
    expect(sample.output()).toMatch(/MongoDB: .* at mongodb:\/\//);
    expect(sample.output()).not.toContain('MONGODB_URI');
    const response = await fetch(`${sample.baseUrl}/orders/1`);
    expect(await response.json()).toMatchObject({ id: '1', status: 'open' });
  });
});

async function waitUntil(check: () => Promise<boolean>): Promise<void> {
  for (let attempt = 0; attempt < 400; attempt += 1) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error('condition not met');
}
