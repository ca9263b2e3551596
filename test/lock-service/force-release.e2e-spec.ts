import { LockLostError, LockStoreUnavailableError } from '../../lib/errors';
import { describeWithFailPoints, faultTools, settleWithin } from './adversarial/kit';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { withReplyDelayProxy } from '../support/reply-delay-proxy';
import { removedWhileTakingSeveralKeys } from './operator-removal-scenario';
import { eventually, LockTestKit, sleep } from './lock-test-kit';

jest.setTimeout(60_000);

describe('LockService.forceRelease', () => {
  const kit = LockTestKit.forSuite();

  it('frees the holder and tells it; the waiter then holds the key undisturbed', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    // Repeated: the local holder's give-back once raced the command (now sent after it).
    for (let round = 0; round < 5; round += 1) {
      const key = `forced:${round}`;
      const held = await a.acquire(key, { renew: true });
      const waiting = b.acquire(key, { timeoutMs: 10_000, renew: true });
      await eventually(() => b.diagnostics.waiters === 1);
      const released = await a.forceRelease(key);
      expect(released.map((holder) => holder.holderId)).toEqual(['A']);
      expect(held.lost).toBe(true);
      expect(held.signal.reason).toBeInstanceOf(LockLostError);
      const next = await waiting;
      expect(next.fence).toBeGreaterThan(held.fence);
      await sleep(200);
      // Still B's, renewed: nothing freed it after it was handed over.
      expect(next.lost).toBe(false);
      expect((await a.inspect(key))?.holderId).toBe('B');
      await next.release();
    }
  });

  it('a call of several keys here that held one it removed takes that key again', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const other = await a.acquire('multi:z', { ttlMs: 30_000 });
    // Keys are taken in sorted order: B holds multi:k, then waits for multi:z.
    const both = b.acquire(['multi:k', 'multi:z'], { ttlMs: 30_000, timeoutMs: 10_000 });
    await eventually(async () => (await b.inspect('multi:k'))?.holderId === 'B');
    await eventually(async () => (await b.inspect('multi:z'))?.waiting === 1);
    const [removed] = await b.forceRelease('multi:k');
    expect(removed.holderId).toBe('B');
    await other.release();
    const handle = await both;
    // Not the removed entry, which another process could have taken meanwhile.
    expect(handle.fences.get('multi:k')).toBeGreaterThan(removed.fence);
    expect(await b.inspect('multi:k')).toMatchObject({
      held: true,
      holderId: 'B',
      fence: handle.fences.get('multi:k'),
    });
    await handle.release();
  });

  it('a call of several keys in another instance that held one it removed takes that key again', () =>
    removedWhileTakingSeveralKeys(
      kit,
      'multi',
      { ttlMs: 30_000, timeoutMs: 15_000 },
      async (operator, key) => {
        const [removed] = await operator.forceRelease(key);
        expect(removed.holderId).toBe('B');
      },
    ));

  it('a holder in another instance is told when its process hears the command, not at its renewal', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    // Renewed a third of 60 s in: told before that, it was told by the command's news.
    const held = await a.acquire('told-elsewhere', { ttlMs: 60_000, renew: true });
    await b.forceRelease('told-elsewhere');
    await eventually(() => held.lost, 10_000);
    expect(held.signal.reason).toBeInstanceOf(LockLostError);
  });

  it("tells another instance's shared holders by reads in parallel, not one after another", async () => {
    const client = await kit.client({ monitorCommands: true });
    const a = await kit.service({ holderId: 'A', client });
    const b = await kit.service({ holderId: 'B' });
    const holders = await Promise.all(
      Array.from({ length: 8 }, () =>
        a.acquire('told-together', { mode: 'shared', ttlMs: 60_000 }),
      ),
    );
    // The line's reads (`find`) A has under way at once, and the most at any moment: one after
    // another, never more than 1.
    let open = 0;
    let most = 0;
    const reads = new Set<number>();
    client.on('commandStarted', (event) => {
      if (event.commandName !== 'find') return;
      reads.add(event.requestId);
      most = Math.max(most, ++open);
    });
    const ended = (event: { requestId: number }) => {
      if (reads.delete(event.requestId)) open -= 1;
    };
    client.on('commandSucceeded', ended);
    client.on('commandFailed', ended);
    await b.forceRelease('told-together');
    await eventually(() => holders.every((held) => held.lost), 10_000);
    expect(most).toBeGreaterThan(1);
  });

  it('names a holder the entry was handed to once', async () => {
    const b = await kit.service({ holderId: 'B' });
    const first = await b.acquire('handed');
    const next = b.acquire('handed', { timeoutMs: 10_000 });
    await sleep(10);
    await first.release();
    const handle = await next;
    // Taken over in the process: the entry's next fence, the server names the entry's first.
    expect(handle.fence).toBe(first.fence + 1n);
    const released = await b.forceRelease('handed');
    expect(released.map((holder) => holder.holderId)).toEqual(['B']);
    expect(handle.lost).toBe(true);
  });

  it('leaves a document lock whose id reads like the key alone', async () => {
    const service = await kit.service({ holderId: 'A' });
    const name = 'force_release_documents';
    await (
      await kit.client()
    )
      .db(kit.mongo.dbName)
      .collection(name)
      .insertOne({ _id: 'abc' as never });
    const document = await service.documents(name).acquire('abc');
    const key = await service.acquire('"abc"');
    // The document lock's internal key is its id's Extended JSON: the same string.
    expect(document.keys).toEqual(['"abc"']);
    await service.forceRelease('"abc"');
    expect(key.lost).toBe(true);
    expect(document.lost).toBe(false);
    await document.release();
  });
});

describeWithFailPoints('LockService.forceRelease with its command in flight', () => {
  const kit = LockTestKit.forSuite();
  const { delayNext, appClient } = faultTools(kit);

  it('tells a holder here whose join was answered meanwhile and removed by the command', async () => {
    const client = await appClient('forced-late');
    const b = await kit.service({ client, holderId: 'B' });
    await b.acquire('warm').then((handle) => handle.release());
    // The next lock write, forceRelease's, runs 600 ms late; B's join lands before it.
    await delayNext('forced-late', 'findAndModify', 600);
    const forced = b.forceRelease('forced-late');
    await sleep(150);
    const held = await b.acquire('forced-late', { ttlMs: 30_000 });
    expect(held.lost).toBe(false);
    const released = await forced;
    expect(released.map((holder) => holder.fence)).toEqual([held.fence]);
    // Told now, not at its renewal ten seconds on.
    expect(held.lost).toBe(true);
    expect(held.signal.reason).toBeInstanceOf(LockLostError);
    await held.release().catch(() => undefined);
  });
});

describe('LockService.forceRelease of a join whose reply is late', () => {
  const kit = LockTestKit.forSuite();

  it("a try whose hold it removed settles within the try's bound though its check is unanswered", async () => {
    await withReplyDelayProxy(kit, async (proxy, uri) => {
      const a = await kit.service({ holderId: 'A' });
      const b = await kit.service({ holderId: 'B', uri });
      await b.acquire('warm').then((handle) => handle.release());
      // B's join lands at once and holds; its reply reaches B 600 ms later, after the news.
      const replyHeld = proxy.holdNextReply('findAndModify', 600);
      const trying = b.tryAcquire('bound-after-news');
      await replyHeld;
      await a.forceRelease('bound-after-news');
      // The renewal that checks the hold before hand-out is answered 3 s late.
      void proxy.holdNextReply('findAndModify', 3_000);

      // A try settles within 1 s (the late-reply margin); it was held by the check's 3 s.
      const settled = await settleWithin(trying, 1_000 + LOAD_SLACK_MS);
      expect(settled.status).toBe('rejected');
      expect(settled.error).toBeInstanceOf(LockStoreUnavailableError);
      expect((settled.error as Error).message).toMatch(/renewal of "bound-after-news"/);
    });
  });

  it('a call whose join it removed, answered after its news, takes the key again (or is told)', async () => {
    await withReplyDelayProxy(kit, async (proxy, uri) => {
      const a = await kit.service({ holderId: 'A' });
      const b = await kit.service({ holderId: 'B', uri });
      await b.acquire('warm').then((handle) => handle.release());
      // B's join lands at once and holds; its reply reaches B 2 s later.
      const replyHeld = proxy.holdNextReply('findAndModify', 2_000);
      const taking = b.acquire('late-reply', { ttlMs: 30_000, timeoutMs: 10_000 });
      await replyHeld;
      const [removed] = await a.forceRelease('late-reply');
      expect(removed.holderId).toBe('B');
      const handle = await taking;
      // Its news reached B before the reply (a hold to check) or after (a handle to tell).
      await eventually(() => handle.lost || handle.fence > removed.fence);
      if (!handle.lost) {
        expect(await a.inspect('late-reply')).toMatchObject({ holderId: 'B', fence: handle.fence });
      }
      await handle.release().catch(() => undefined);
    });
  });
});
