import type { INestApplication } from '@nestjs/common';
import { LockNotAcquiredError, LockService } from 'nestjs-mongo-lock';
import type { ItemView } from './items.controller.js';
import { type LedgerEntry, LedgerService } from './ledger.service.js';

function expect(condition: boolean, message: string, detail?: unknown): void {
  if (!condition) {
    throw new Error(detail === undefined ? message : `${message}: ${JSON.stringify(detail)}`);
  }
}

async function request(
  url: string,
  method: 'GET' | 'POST' = 'GET',
): Promise<{ status: number; retryAfter: string | null; body: unknown }> {
  const response = await fetch(url, { method });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text) as unknown;
  } catch {
    // not JSON: keep the text for the message
  }
  return { status: response.status, retryAfter: response.headers.get('retry-after'), body };
}

/** Each check prints `ok - <name>`; the first that fails throws. */
export async function runChecks(app: INestApplication, baseUrl: string): Promise<void> {
  const locks = app.get(LockService);
  const ok = (name: string): void => console.log(`ok - ${name}`);

  // A @Locked handler with timeoutMs 0 while the key is held through LockService.
  const held = await locks.acquire('item:42', { ttlMs: 30_000 });
  const busy = await request(`${baseUrl}/items/42`);
  await held.release();
  expect(busy.status === 423, 'busy route: expected 423', busy);
  const seconds = Number(busy.retryAfter);
  expect(Number.isInteger(seconds) && seconds >= 1 && seconds <= 30, 'Retry-After', busy);
  const free = await request(`${baseUrl}/items/42`);
  const item = free.body as ItemView;
  expect(free.status === 200 && item.key === 'item:42', 'route after release', free);
  ok(`busy route answers 423 with Retry-After: ${seconds}, then 200 once released`);

  // A provider method under @Locked, through HTTP and called directly.
  const posted = await request(`${baseUrl}/ledger/acct-1`, 'POST');
  const entry = posted.body as LedgerEntry;
  expect(posted.status === 201, 'provider route: expected 201', posted);
  expect(entry.key === 'ledger:acct-1' && entry.heldByThisCall, 'provider ran unlocked', entry);
  expect((await locks.inspect('ledger:acct-1'))?.held !== true, 'provider lock not released');
  const ledger = app.get(LedgerService);
  const other = await locks.acquire('ledger:acct-2');
  const refused = await ledger.post('acct-2', 1).then(
    (result) => result,
    (error: unknown) => error,
  );
  await other.release();
  expect(refused instanceof LockNotAcquiredError, 'provider: expected LockNotAcquiredError', {
    got: String(refused),
  });
  ok(`provider @Locked method runs under its lock (fence ${entry.fence}), refused while held`);

  // Keys that cannot be built from the request.
  const several = await request(`${baseUrl}/items?id=a&id=b`);
  const missing = await request(`${baseUrl}/items`);
  const fine = await request(`${baseUrl}/items?id=7`);
  expect(several.status === 400, 'bad key (?id=a&id=b): expected 400', several);
  expect(missing.status === 400, 'bad key (no id): expected 400', missing);
  expect(fine.status === 200, 'good key (?id=7): expected 200', fine);
  ok('a bad key answers 400');
}
