// The functions given to page.waitForFunction and $$eval run in the browser.
/// <reference lib="dom" />
import { fork } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { LockService, type LockHandle } from '../../lib';
import { MongoLockBoardModule } from '../../lib/board';
import { LEADER_KEY_PREFIX } from '../../lib/leadership/leader-key';
import { LockWorker } from '../lock-service/lock-test-kit';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { TS_CHILD_FLAGS } from '@nestjs-mongo-lock/process-harness';
import { HTTP_ADAPTERS, lockModule } from '../nest/support/nest-apps';
import { EventsGate, listeningApp, OperatorHeaderGuard } from './board-app';

/** How long a change may take to show: under the page's 5 s refresh, so the stream shows it. */
const LIVE_MS = 4_000;
/**
 * Where the test is about what the page shows, not how soon: the stream or the 5 s refresh, with
 * room for a loaded machine (two test workers and the browser on two cores).
 */
const SHOWN_MS = 15_000;

jest.setTimeout(90_000);

/**
 * A browser the machine has (never downloaded at run time): BOARD_BROWSER, else Debian's
 * chromium (.ci/run installs it), else the Chrome of GitHub's Ubuntu runners.
 */
const CANDIDATES = [process.env.BOARD_BROWSER, '/usr/bin/chromium', '/usr/bin/google-chrome'];
const CHROMIUM = CANDIDATES.find((path) => path !== undefined && existsSync(path)) ?? '';
const hasChromium = CHROMIUM !== '';
if (!hasChromium) {
  console.warn(
    '[lock board browser tests] SKIPPED: no browser at BOARD_BROWSER, /usr/bin/chromium or ' +
      "/usr/bin/google-chrome. Install Debian's chromium (apt-get install chromium; .ci/run does).",
  );
}
const describeInBrowser = hasChromium ? describe : describe.skip;

/** Where the screenshot for docs/images/lock-board.png is written (copied by hand). */
const SCREENSHOT = join(tmpdir(), 'lock-board.png');
/** Keys named like members of every object: the page must not take them for its own data. */
const PROTOTYPE_KEYS = ['constructor', 'toString', '__proto__', 'hasOwnProperty'];
const HOSTILE_KEYS = [
  '<img src=x onerror=alert(1)>',
  '</script><script>alert(2)</script>',
  ...PROTOTYPE_KEYS,
];

describeInBrowser.each(HTTP_ADAPTERS)('the lock board in a real browser (%s)', (adapter) => {
  let mongo: TestMongo;
  let app: INestApplication;
  let url: string;
  let locks: LockService;
  let context: BrowserContext;
  let page: Page;
  let userDataDir: string;
  const dialogs: string[] = [];
  const consoleErrors: string[] = [];
  /** What the browser reports when the CSP blocks a script, a style or a request. */
  const cspViolations = () =>
    consoleErrors.filter((message) => /Content Security Policy|Refused to/i.test(message));
  const workers: LockWorker[] = [];

  /** The keys of the rows the page shows now. */
  const shownKeys = () =>
    page.$$eval('#rows tr', (rows) => rows.map((row) => row.getAttribute('data-key')));
  /**
   * Waits until the page shows (or no longer shows) `key`, at most `timeout` ms. On a timeout the
   * error says what the page showed: its status line, live mark, rows and console errors.
   */
  const untilShown = (key: string, shown: boolean, timeout: number) =>
    page
      .waitForFunction(
        ([wanted, present]) =>
          [...document.querySelectorAll('#rows tr')].some(
            (row) => row.getAttribute('data-key') === wanted,
          ) === present,
        [key, shown] as const,
        { timeout },
      )
      .catch(async (error: Error) => {
        const seen = await page.evaluate(async (wanted) => {
          // What the API answers now, asked from the page (a fetch that hangs says so).
          const api = `${location.pathname.replace(/\/+$/, '')}/api/locks?prefix=`;
          const answered = await fetch(api + encodeURIComponent(wanted), {
            signal: AbortSignal.timeout(3_000),
          })
            .then(async (response) => `${response.status} ${(await response.text()).slice(0, 300)}`)
            .catch((error: Error) => `no answer: ${error.message}`);
          return {
            status: document.getElementById('status')?.textContent,
            live: document.querySelector('.live')?.textContent,
            rows: [...document.querySelectorAll('#rows tr')].map((r) => r.getAttribute('data-key')),
            api: answered,
          };
        }, key);
        const errors = consoleErrors.join(' | ');
        throw new Error(
          `${error.message}; the page showed ${JSON.stringify(seen)}; console: ${errors}`,
        );
      });
  const rowText = (key: string) =>
    page.$$eval(
      '#rows tr',
      (rows, wanted) => rows.find((row) => row.getAttribute('data-key') === wanted)?.textContent,
      key,
    );

  beforeAll(async () => {
    mongo = await startTestMongo();
    ({ app, url } = await listeningApp(
      {
        imports: [
          lockModule(mongo, { holderId: `board-browser-${adapter}` }),
          MongoLockBoardModule.forRoot({ guard: OperatorHeaderGuard, allowRelease: true }),
          MongoLockBoardModule.forRoot({
            path: 'ops/gated',
            guard: EventsGate,
            eventStreamMaxMs: 1_000,
          }),
        ],
      },
      adapter,
    ));
    locks = app.get(LockService);
    userDataDir = mkdtempSync(join(tmpdir(), 'lock-board-chromium-'));
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      viewport: { width: 1100, height: 560 },
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    page.on('pageerror', (error) => consoleErrors.push(error.message));
  });

  afterAll(async () => {
    for (const worker of workers) if (worker.child.exitCode === null) worker.child.kill('SIGKILL');
    await context?.close();
    if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
    await app?.close();
    await mongo?.stop();
  });

  it('loads under its own CSP and goes live, with no CSP violation', async () => {
    const response = await page.goto(`${url}/locks`);
    expect(response?.status()).toBe(200);
    const csp = response?.headers()['content-security-policy'] ?? '';
    expect(csp).toMatch(/default-src 'none'; script-src 'sha256-[^']+'; style-src 'sha256-[^']+'/);
    await page.waitForFunction(
      () => document.getElementById('live')?.textContent === 'live',
      null,
      {
        timeout: 5_000,
      },
    );
    // The hashed stylesheet applied: the table spans the page.
    const tableWidth = await page.$eval('table', (table) => getComputedStyle(table).width);
    expect(parseFloat(tableWidth)).toBeGreaterThan(900);
    expect(consoleErrors).toEqual([]);
  });

  it('shows a lock taken in another OS process within 1 s, and drops it on release', async () => {
    const child = fork(join(__dirname, '../support/lock-worker.ts'), [], {
      execArgv: TS_CHILD_FLAGS,
      env: {
        ...process.env,
        LOCK_WORKER_ARGS: JSON.stringify({
          mode: 'hold',
          uri: mongo.uri,
          dbName: mongo.dbName,
          collectionName: 'locks',
          key: 'remote:report',
          ttlMs: 30_000,
        }),
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const worker = new LockWorker(child);
    workers.push(worker);
    const { fence } = (await worker.next('acquired', 60_000)) as { fence: string };
    await untilShown('remote:report', true, LIVE_MS);
    const text = await rowText('remote:report');
    expect(text).toContain(`fence ${fence}`);
    expect(text).toMatch(/exclusive/);
    expect(text).toMatch(/\d+(\.\d)? s left/);
    worker.send({ type: 'release' });
    await worker.next('released');
    await untilShown('remote:report', false, LIVE_MS);
    await worker.exited;
  });

  it('shows hostile key names as text (no dialog, no injected node) and offers their release', async () => {
    const held = await Promise.all(HOSTILE_KEYS.map((key) => locks.acquire(key)));
    for (const key of HOSTILE_KEYS) await untilShown(key, true, SHOWN_MS);
    for (const key of HOSTILE_KEYS) {
      const shown = await page.$$eval(
        '#rows tr',
        (rows, wanted) =>
          rows.find((row) => row.getAttribute('data-key') === wanted)?.querySelector('td.key code')
            ?.textContent,
        key,
      );
      expect(shown).toBe(key);
    }
    await page.waitForTimeout(300); // an onerror would have fired by now
    expect(await page.$$eval('img, #rows script', (nodes) => nodes.length)).toBe(0);
    expect(dialogs).toEqual([]);
    // Each offers its release, and a key named like an object member is released from the page.
    const button = (key: string) =>
      page.locator(`#rows tr[data-key=${JSON.stringify(key)}] button.release`);
    for (const key of HOSTILE_KEYS) {
      expect(await button(key).textContent()).toBe('Release');
      expect(await button(key).isDisabled()).toBe(false);
    }
    await context.setExtraHTTPHeaders({ 'x-operator': 'browser-admin' });
    try {
      for (const key of PROTOTYPE_KEYS) {
        await button(key).click();
        await button(key).click(); // confirm
        await untilShown(key, false, SHOWN_MS);
        expect((await locks.inspect(key))?.held).toBe(false);
      }
    } finally {
      await context.setExtraHTTPHeaders({});
    }
    // Those released from the page are lost to their handles: release the others.
    await Promise.all(held.filter((h) => !h.signal.aborted).map((h) => h.release()));
    for (const key of HOSTILE_KEYS) await untilShown(key, false, SHOWN_MS);
  });

  it('force-releases from the page only when the guard allows (403 otherwise)', async () => {
    const handle = await locks.acquire('stuck:page', { ttlMs: 60_000 });
    await untilShown('stuck:page', true, SHOWN_MS);
    const button = () => page.locator('#rows tr[data-key="stuck:page"] button.release');
    await button().click();
    await button().click(); // confirm
    await page.waitForFunction(() =>
      /failed: 403/.test(document.getElementById('status')!.textContent),
    );
    expect(handle.signal.aborted).toBe(false);

    // What a signed-in operator's browser sends (here a header; a session cookie in an app).
    await context.setExtraHTTPHeaders({ 'x-operator': 'browser-admin' });
    try {
      await button().click();
      await button().click();
      await page.waitForFunction(() =>
        /^Released stuck:page from board-browser-\w+ \(fence \d+\)$/.test(
          document.getElementById('status')!.textContent,
        ),
      );
      expect(handle.signal.aborted).toBe(true);
      await untilShown('stuck:page', false, SHOWN_MS);
      expect((await locks.inspect('stuck:page'))?.held).toBe(false);
    } finally {
      await context.setExtraHTTPHeaders({});
    }
  });

  it('does not offer a release on its way again when the page renders meanwhile', async () => {
    const handle = await locks.acquire('stuck:slow', { ttlMs: 60_000 });
    await untilShown('stuck:slow', true, SHOWN_MS);
    let letThrough!: () => void;
    const held = new Promise<void>((resolve) => (letThrough = resolve));
    let sent = 0;
    await page.route('**/api/lock/release?*', async (route) => {
      sent += 1;
      await held;
      await route.continue();
    });
    await context.setExtraHTTPHeaders({ 'x-operator': 'browser-admin' });
    try {
      const button = () => page.locator('#rows tr[data-key="stuck:slow"] button.release');
      await button().click();
      await button().click(); // confirm: the release is on its way, held back
      // Another key's event renders the rows again while the release is held back.
      const other = await locks.acquire('stuck:other');
      await untilShown('stuck:other', true, SHOWN_MS);
      expect(await button().isDisabled()).toBe(true);
      expect(await button().textContent()).toBe('Releasing');
      letThrough();
      await untilShown('stuck:slow', false, SHOWN_MS);
      expect(sent).toBe(1);
      expect(handle.signal.aborted).toBe(true);
      await other.release();
    } finally {
      letThrough();
      await page.unroute('**/api/lock/release?*');
      await context.setExtraHTTPHeaders({});
    }
  });

  it('releases the holder it showed: one that took the key meanwhile is not freed (409 shown)', async () => {
    const shown = await locks.acquire('stuck:changed', { ttlMs: 60_000 });
    await untilShown('stuck:changed', true, SHOWN_MS);
    await context.setExtraHTTPHeaders({ 'x-operator': 'browser-admin' });
    // Another instance takes it: a caller of this one could take over the entry itself.
    const other = new LockService({ uri: mongo.uri, dbName: mongo.dbName, holderId: 'other' });
    let next: LockHandle | undefined;
    try {
      const button = () => page.locator('#rows tr[data-key="stuck:changed"] button.release');
      await button().click(); // Release, with `shown` on the row
      // Before the confirmation, the holder shown releases and another takes the key.
      await shown.release();
      next = await other.acquire('stuck:changed', { ttlMs: 60_000 });
      await button().click(); // confirm
      await page.waitForFunction(() =>
        /^Release of stuck:changed refused: Nothing released: none of the holders shown \(fence \d+\)/.test(
          document.getElementById('status')!.textContent,
        ),
      );
      expect(await page.locator('#status').getAttribute('class')).toBe('error');
      expect(next.signal.aborted).toBe(false);
      expect((await locks.inspect('stuck:changed'))?.fence).toBe(next.fence);
      // The page shows the new holder, whose release it then offers again.
      await page.waitForFunction(
        (fence) =>
          document
            .querySelector('#rows tr[data-key="stuck:changed"]')
            ?.textContent?.includes(fence),
        `fence ${next.fence}`,
      );
      await button().click();
      await button().click();
      await page.waitForFunction(() =>
        /^Released stuck:changed from/.test(document.getElementById('status')!.textContent),
      );
      await expect(next.extend()).rejects.toThrow();
    } finally {
      await other.close();
      await context.setExtraHTTPHeaders({});
    }
  });

  it('filters by prefix, shows leaders, and is screenshotted for the docs', async () => {
    const held = await Promise.all([
      locks.acquire('orders:1042', { ttlMs: 30_000 }),
      locks.acquire('orders:1043', { ttlMs: 45_000, scope: 'session:7f3a' }),
      locks.acquire('reports:daily', { mode: 'shared', ttlMs: 20_000 }),
      locks.acquire('reports:daily', { mode: 'shared', ttlMs: 25_000 }),
      locks.acquire('exports', { permits: 3, weight: 2, ttlMs: 60_000 }),
      locks.acquire(`${LEADER_KEY_PREFIX}digest`, { ttlMs: 15_000 }),
    ]);
    await untilShown(`${LEADER_KEY_PREFIX}digest`, true, SHOWN_MS);
    expect(await rowText(`${LEADER_KEY_PREFIX}digest`)).toContain('leader of digest');
    if (adapter === 'express') await page.screenshot({ path: SCREENSHOT });
    await page.fill('#prefix', 'orders:');
    await page.press('#prefix', 'Enter');
    await page.waitForFunction(() => document.querySelectorAll('#rows tr').length === 2);
    expect(await shownKeys()).toEqual(['orders:1042', 'orders:1043']);
    expect(await rowText('orders:1043')).toContain('scope session:7f3a');
    await Promise.all(held.map((handle) => handle.release()));
    expect(cspViolations()).toEqual([]);
  });

  /** Waits until the live indicator of `on` reads `text`. */
  const untilLive = (on: Page, text: string, timeout: number) =>
    on.waitForFunction((wanted) => document.getElementById('live')?.textContent === wanted, text, {
      timeout,
    });

  it('stays live across its planned reconnects, and says when the stream is cut or refused', async () => {
    const gated = await context.newPage();
    try {
      await gated.goto(`${url}/ops/gated`);
      await untilLive(gated, 'live', 5_000);
      // The server ends the stream each second: the corner must not flicker meanwhile.
      await gated.evaluate(() => {
        const seen: string[] = [];
        (window as unknown as { liveSeen: string[] }).liveSeen = seen;
        const node = document.getElementById('live')!;
        new MutationObserver(() => seen.push(node.textContent ?? '')).observe(node, {
          childList: true,
          characterData: true,
          subtree: true,
        });
      });
      await new Promise((resolve) => setTimeout(resolve, 3_500));
      const seen = await gated.evaluate(
        () => (window as unknown as { liveSeen: string[] }).liveSeen,
      );
      expect(seen.filter((text) => text !== 'live')).toEqual([]);
      // A cut connection: the browser retries on its own.
      EventsGate.mode = 'drop';
      await untilLive(gated, 'reconnecting', 5_000);
      // A refused one (as when access ends): the browser gives up; the page asks again.
      EventsGate.mode = 'refuse';
      await untilLive(gated, 'not live, refreshing every 5 s', 10_000);
      EventsGate.mode = 'open';
      await untilLive(gated, 'live', 10_000);
    } finally {
      EventsGate.mode = 'open';
      await gated.close();
    }
  });

  it("never says live with changeStreams: 'off', where it only refreshes", async () => {
    const polling = await listeningApp(
      {
        imports: [
          lockModule(mongo, { holderId: `board-off-${adapter}`, changeStreams: 'off' }),
          MongoLockBoardModule.forRoot(),
        ],
      },
      adapter,
    );
    const offPage = await context.newPage();
    try {
      await offPage.goto(`${polling.url}/locks`);
      await untilLive(offPage, 'refreshing every 5 s', 5_000);
      // Past several of the stream's checks, it still does not claim changes reach it.
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      expect(await offPage.$eval('#live', (node) => node.textContent)).toBe('refreshing every 5 s');
    } finally {
      await offPage.close();
      await polling.app.close();
    }
  });
});
