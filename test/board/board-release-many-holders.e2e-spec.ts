// Promised (docs/lock-board.md): Release "frees the holders the row showed when Release was
// pressed (every one of a shared lock or semaphore)", and the release route takes 1 to 1,000
// fences. What happens instead: for a semaphore (or shared lock) with 1,000 holders the page's
// request never reaches the route. The page (lib/board/board-page-script.ts) puts every fence
// in the query through URLSearchParams, which writes each comma as `%2C`: 1,000 fences of 14
// digits (fences are the server clock in ms times 16) make a 17,000-byte request line, over
// Node's default 16 KiB header limit, and the server answers 431 (Express and Fastify alike):
// the page says "Release of … failed: 431", and nothing is freed. From about 950 holders on.
/// <reference lib="dom" />
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { LockService, type LockHandle } from '../../lib';
import { MongoLockBoardModule } from '../../lib/board';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { lockModule } from '../nest/support/nest-apps';
import { listeningApp, OperatorHeaderGuard } from './board-app';

jest.setTimeout(300_000);

const CANDIDATES = [process.env.BOARD_BROWSER, '/usr/bin/chromium', '/usr/bin/google-chrome'];
const CHROMIUM = CANDIDATES.find((path) => path !== undefined && existsSync(path)) ?? '';
const describeInBrowser = CHROMIUM !== '' ? describe : describe.skip;

const KEY = 'many:holders';
const HOLDERS = 1_000;

describeInBrowser('the board releases a semaphore with 1,000 holders (express)', () => {
  let mongo: TestMongo;
  let app: INestApplication;
  let url: string;
  let locks: LockService;
  let context: BrowserContext;
  let page: Page;
  let userDataDir: string;

  beforeAll(async () => {
    mongo = await startTestMongo();
    ({ app, url } = await listeningApp(
      {
        imports: [
          lockModule(mongo, { holderId: 'board-many' }),
          MongoLockBoardModule.forRoot({ guard: OperatorHeaderGuard, allowRelease: true }),
        ],
      },
      'express',
    ));
    locks = app.get(LockService);
    userDataDir = mkdtempSync(join(tmpdir(), 'lock-board-many-'));
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
    });
    page = context.pages()[0] ?? (await context.newPage());
  });

  afterAll(async () => {
    await context?.close();
    if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
    await app?.close();
    await mongo?.stop();
  });

  it('frees every holder the row showed', async () => {
    const held: LockHandle[] = [];
    // A lease that outlasts the set-up and the release on a loaded machine.
    const options = { permits: HOLDERS, ttlMs: 600_000 };
    while (held.length < HOLDERS) {
      const batch = Array.from({ length: 50 }, () => locks.acquire(KEY, options));
      held.push(...(await Promise.all(batch)));
    }
    expect((await locks.inspect(KEY))?.holders).toHaveLength(HOLDERS);

    await context.setExtraHTTPHeaders({ 'x-operator': 'browser-admin' });
    await page.goto(`${url}/locks`);
    const button = () => page.locator(`#rows tr[data-key="${KEY}"] button.release`);
    await button().waitFor({ timeout: 30_000 });
    await button().click();
    await button().click(); // confirm
    // Released, or its failure: either way the page says so.
    await page.waitForFunction(
      () => /^Release(d | of )/.test(document.getElementById('status')?.textContent ?? ''),
      null,
      { timeout: 60_000 },
    );
    const status = (await page.locator('#status').textContent()) ?? '';
    expect(status.slice(0, 80)).toMatch(/^Released many:holders from board-many \(fence \d+\)/);
    expect((await locks.inspect(KEY))?.held).toBe(false);
    expect(held.every((handle) => handle.lost)).toBe(true);
  });
});
