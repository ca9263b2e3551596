import { MongoServerError, type Document } from 'mongodb';
import { firstValueFrom, toArray } from 'rxjs';
import { LockLostError, LockNotAcquiredError, MongoLockError } from '../../lib/errors';
import type { LockHandle } from '../../lib/lock-handle';
import { LockService } from '../../lib/lock.service';
import { LEAVE_PIPELINE, RENEW_PIPELINE } from '../../lib/store/line/line-pipelines';
import { commandOf, interceptedClient } from '../support/intercepted-collection';
import { LockTestKit, eventually, sleep } from './lock-test-kit';

jest.setTimeout(60_000);

describe('LockService holding', () => {
  const kit = LockTestKit.forSuite();

  it('withLock renews the lease while fn runs longer than the lease', async () => {
    const locks = await kit.service();
    const other = await kit.service();
    const result = await locks.withLock(
      'long-job',
      async (handle) => {
        await sleep(3_000);
        expect(handle.lost).toBe(false);
        expect(await other.tryAcquire('long-job')).toBeNull();
        return 'done';
      },
      { ttlMs: 1_000 },
    );
    expect(result).toBe('done');
    expect((await other.inspect('long-job'))?.held).toBe(false);
  });

  it('a lease that runs out aborts the signal, emits lost$ once, and release reports it', async () => {
    const locks = await kit.service();
    const other = await kit.service();
    const handle = await locks.acquire('fragile', { ttlMs: 1_000 });
    const losses = firstValueFrom(handle.lost$.pipe(toArray()));
    await sleep(1_200);
    expect(handle.lost).toBe(true);
    expect(handle.signal.aborted).toBe(true);
    expect(handle.signal.reason).toBeInstanceOf(LockLostError);
    const lost = await losses;
    expect(lost).toHaveLength(1);
    expect(lost[0].key).toBe('fragile');
    const taker = await other.acquire('fragile', { timeoutMs: 0 });
    await expect(handle.release()).rejects.toBeInstanceOf(LockLostError);
    await expect(handle.extend()).rejects.toBeInstanceOf(LockLostError);
    expect((await other.inspect('fragile'))?.holderId).toBe(other.holderId);
    await taker.release();
  });

  it('a refused renewal marks the handle lost and never takes the key back', async () => {
    const locks = await kit.service();
    // A lease far longer than the wait below, renewed every 600 ms: a loss seen in time can only
    // come from a refused renewal, not from the lease running out.
    const handle = await locks.acquire('stolen', { ttlMs: 6_000, renew: { intervalRatio: 0.1 } });
    const leaseEnd = handle.expiresAt.getTime();
    let lostAt = Number.POSITIVE_INFINITY;
    handle.signal.addEventListener('abort', () => (lostAt = Date.now()), { once: true });
    const client = await kit.client();
    // Another writer replaces our entry in the key's line by its own.
    const [before] = await kit.rawLocks();
    const ours = (before.line as { t: string; f: unknown }[])[0];
    const thief = { t: 'somebody-else', f: ours.f, e: new Date(Date.now() + 60_000), h: 'thief' };
    await client
      .db(kit.mongo.dbName)
      .collection<{ _id: string }>(`${kit.collectionName}_line`)
      .updateOne({ _id: 'stolen' }, { $set: { line: [thief] } });
    await eventually(() => handle.lost, 2_000);
    expect(lostAt).toBeLessThan(leaseEnd);
    expect(handle.signal.reason).toMatchObject({ name: 'LockLostError', key: 'stolen' });
    await expect(handle.release()).rejects.toBeInstanceOf(LockLostError);
    const [raw] = await kit.rawLocks();
    expect(raw.line).toEqual([thief]);
    expect(await locks.inspect('stolen')).toMatchObject({ held: true, holderId: 'thief' });
  });

  it('release reports a lease that ran out even when nobody took the key', async () => {
    const locks = await kit.service();
    const handle = await locks.acquire('lapsed', { ttlMs: 1_000 });
    await sleep(1_100);
    await expect(handle.release()).rejects.toBeInstanceOf(LockLostError);
    expect((await locks.inspect('lapsed'))?.held).toBe(false);
  });

  it('withLock passes fn errors through unchanged and always releases', async () => {
    const locks = await kit.service();
    const failure = new TypeError('boom');
    await expect(
      locks.withLock('erring', () => {
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect((await locks.inspect('erring'))?.held).toBe(false);
  });

  it('withLock rejects with LockLostError when fn succeeded but the lease was lost', async () => {
    const locks = await kit.service();
    await expect(
      locks.withLock('lost-in-fn', () => sleep(1_200), { ttlMs: 1_000, renew: false }),
    ).rejects.toBeInstanceOf(LockLostError);
  });

  it('withLock is re-entrant in the same async context and exposes LockService.current()', async () => {
    const client = await kit.client();
    const locks = await kit.service({ client });
    expect(LockService.current()).toBeUndefined();
    const fences = await locks.withLock(['a', 'b'], async (outer) => {
      expect(LockService.current()).toBe(outer);
      const inner = await locks.withLock('a', async (handle) => {
        // The outer lock, seen through the inner call's keys.
        expect(handle.keys).toEqual(['a']);
        expect(handle.fence).toBe(outer.fences.get('a'));
        expect(handle.signal.aborted).toBe(false);
        expect(LockService.current()).toBe(handle);
        return handle.fence;
      });
      // Disjoint keys nest normally.
      const nested = await locks.withLock('c', async (handle) => {
        expect(LockService.current()).toBe(handle);
        return handle.fence;
      });
      expect(LockService.current()).toBe(outer);
      expect(outer.released).toBe(false);
      await expect(locks.withLock(['b', 'z'], () => 1)).rejects.toBeInstanceOf(MongoLockError);
      return [inner, nested];
    });
    expect(fences[0]).toBeGreaterThan(0n);
    expect(LockService.current()).toBeUndefined();
    expect((await locks.inspect('a'))?.held).toBe(false);
  });

  it('a re-entered withLock sees only its own keys and fences, and releases nothing', async () => {
    const locks = await kit.service();
    await locks.withLock(['view-a', 'view-b', 'view-c'], async (outer) => {
      const seen = await locks.withLock(['view-c', 'view-b'], async (inner) => ({
        key: inner.key,
        keys: inner.keys,
        fence: inner.fence,
        fences: inner.fences,
        current: LockService.current() === inner,
        aborted: inner.signal.aborted,
      }));
      const serverFenceOfB = (await locks.inspect('view-b'))?.fence;
      expect(serverFenceOfB).not.toBe(outer.fence);
      expect(seen).toEqual({
        key: 'view-b',
        keys: ['view-b', 'view-c'],
        fence: serverFenceOfB,
        fences: new Map([
          ['view-b', serverFenceOfB],
          ['view-c', (await locks.inspect('view-c'))?.fence],
        ]),
        current: true,
        aborted: false,
      });
      // Its release, and its end, leave the outer lock held: the outer call releases it.
      await locks.withLock('view-b', (inner) => inner.release());
      expect(outer.released).toBe(false);
      expect(LockService.current()).toBe(outer);
      const holders = (await locks.inspect('view-b'))?.holders ?? [];
      expect(holders.map((holder) => holder.fence)).toEqual([serverFenceOfB]);
    });
    expect((await locks.inspect('view-b'))?.held).toBe(false);
  });

  it('a re-entered call its enclosing call did not wait for is told as that call lets the lock go', async () => {
    const locks = await kit.service();
    const other = await kit.service();
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    let nested: Promise<boolean> | undefined;
    let signal: AbortSignal | undefined;
    let view: LockHandle | undefined;
    await locks.withLock('left-running', () => {
      nested = locks.withLock('left-running', async (inner) => {
        ({ signal } = inner);
        view = inner;
        await finished;
        return inner.lost;
      });
    });

    // Released by the enclosing call: another instance holds the key while the work goes on.
    const theirs = await other.tryAcquire('left-running');
    expect(theirs).not.toBeNull();
    expect(signal?.reason).toBeInstanceOf(LockLostError);
    expect((signal?.reason as Error).message).toMatch(/released by its enclosing call/);
    // Its handle says so everywhere: lost, lost$, and extend() and release() reject with it.
    expect(view?.lost).toBe(true);
    await expect(firstValueFrom(view!.lost$)).resolves.toBe(signal?.reason);
    await expect(view!.extend()).rejects.toBe(signal?.reason);
    await expect(view!.release()).rejects.toBe(signal?.reason);
    finish();
    await expect(nested).rejects.toBe(signal?.reason);
    await theirs!.release();
  });

  it('a re-entered call left running is told at its first look once the enclosing release is sent', async () => {
    let holdLeave!: () => void;
    const leaveHeld = new Promise<void>((resolve) => (holdLeave = resolve));
    let leaveSent!: () => void;
    const sent = new Promise<void>((resolve) => (leaveSent = resolve));
    const client = interceptedClient(await kit.client(), async (target, args) => {
      if (commandOf(args).pipeline === LEAVE_PIPELINE) {
        leaveSent();
        // The leave may land at once; its reply is held back.
        const reply = await target.findOneAndUpdate(...args);
        await leaveHeld;
        return reply;
      }
      return target.findOneAndUpdate(...args);
    });
    const locks = await kit.service({ client, localHandOff: false });
    let view: LockHandle | undefined;
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    let nested: Promise<unknown> | undefined;
    const outer = locks.withLock('sent-away', () => {
      nested = locks.withLock('sent-away', async (inner) => {
        view = inner;
        await finished;
      });
    });
    await sent;
    // The enclosing call's release is on its way (the key may be free already): not protected.
    expect(view?.signal.aborted).toBe(true);
    expect(view?.signal.reason).toBeInstanceOf(LockLostError);
    holdLeave();
    await outer;
    finish();
    await expect(nested).rejects.toBeInstanceOf(LockLostError);
  });

  it('a re-entered call sees the loss of the outer lock: signal, lost, and release rejects', async () => {
    const locks = await kit.service();
    let nested: Promise<string> | undefined;
    let reason: unknown;
    await expect(
      locks.withLock(['gone-a', 'gone-b'], () => {
        nested = locks.withLock('gone-b', async (inner) => {
          await locks.releaseAllHeld();
          expect(inner.lost).toBe(true);
          reason = inner.signal.reason;
          expect(reason).toBeInstanceOf(LockLostError);
          await expect(inner.release()).rejects.toBe(reason);
          return 'finished';
        });
        return nested;
      }),
    ).rejects.toBeInstanceOf(LockLostError);
    // Its work went on past the loss: the nested call says so too.
    await expect(nested).rejects.toBe(reason);
  });

  it("a re-entered call's signal checks the lease at every look, as its enclosing one's does", async () => {
    const locks = await kit.service();
    let abortedAtFirstLook: boolean | undefined;
    const outcome = locks.withLock(
      'paused',
      () =>
        locks.withLock('paused', (inner) => {
          // The event loop blocked past the lease: no timer has run, yet a look sees the loss.
          const until = Date.now() + 1_500;
          while (Date.now() < until);
          abortedAtFirstLook = inner.signal.aborted;
        }),
      { ttlMs: 1_000, renew: false },
    );
    await expect(outcome).rejects.toBeInstanceOf(LockLostError);
    expect(abortedAtFirstLook).toBe(true);
  });

  it('a call re-entering a lock taken away by an operator fails, and does not take it anew', async () => {
    const locks = await kit.service();
    const inner = jest.fn();
    let later!: Promise<string>;
    await expect(
      locks.withLock('revoked', async () => {
        // Made inside, run after the outer call returned: no longer re-entry, so it locks.
        later = sleep(300).then(() => locks.withLock('revoked', () => 'taken anew'));
        await locks.releaseAllHeld();
        await expect(locks.withLock('revoked', inner)).rejects.toBeInstanceOf(LockLostError);
      }),
    ).rejects.toBeInstanceOf(LockLostError);
    expect(inner).not.toHaveBeenCalled();
    expect((await locks.inspect('revoked'))?.held).toBe(false);
    await expect(later).resolves.toBe('taken anew');
  });

  it('code a withLock left behind, run while its release is on its way, locks the key anew', async () => {
    // The leave lands on the server, and its reply comes 500 ms later: the code left behind
    // runs as soon as the leave has landed, and checks that its reply has not come yet.
    let leaveLanded!: () => void;
    const landed = new Promise<void>((resolve) => (leaveLanded = resolve));
    let leaveAnswered = false;
    const client = interceptedClient(await kit.client(), async (target, args) => {
      const reply = await target.findOneAndUpdate(...args);
      if (commandOf(args).pipeline === LEAVE_PIPELINE) {
        leaveLanded();
        await sleep(500);
        leaveAnswered = true;
      }
      return reply;
    });
    const locks = await kit.service({ client, localHandOff: false });
    let later!: Promise<bigint>;
    let currentThen: unknown = 'not read';
    let answeredThen: boolean | undefined;
    const outer = await locks.withLock('left-behind', async (lock) => {
      later = landed.then(() => {
        answeredThen = leaveAnswered;
        currentThen = LockService.current();
        return locks.withLock('left-behind', (inner) => inner.fence);
      });
      return lock.fence;
    });
    // Not run under the outer lock, whose release had freed the key: it took the key itself.
    expect(await later).toBeGreaterThan(outer);
    expect(answeredThen).toBe(false);
    expect(currentThen).toBeUndefined();
  });

  it('another async context of the same service waits instead of re-entering', async () => {
    const locks = await kit.service();
    let enterElsewhere!: () => void;
    // Chained outside withLock, so it runs in the outer async context.
    const elsewhere = new Promise<void>((resolve) => (enterElsewhere = resolve)).then(() =>
      locks.withLock('exclusive', () => 1, { timeoutMs: 200 }),
    );
    await locks.withLock('exclusive', async () => {
      enterElsewhere();
      await expect(elsewhere).rejects.toBeInstanceOf(LockNotAcquiredError);
    });
  });

  it('multi-key acquisition is all or nothing, and releases what it took', async () => {
    const locks = await kit.service();
    const other = await kit.service();
    const blocker = await other.acquire('m2');
    // Each key's join must be answered by the deadline (else the wait fails as unavailable): the
    // pool connection is opened first, and the wait leaves room for two joins on a loaded machine.
    await locks.inspect('m1');
    const error = await locks
      .acquire(['m3', 'm1', 'm2'], { timeoutMs: 1_500 })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    expect((error as LockNotAcquiredError).keys).toEqual(['m1', 'm2', 'm3']);
    expect((error as LockNotAcquiredError).holderId).toBe(other.holderId);
    expect((await other.inspect('m1'))?.held).toBe(false);
    expect(await other.inspect('m3')).toBeNull();
    await blocker.release();

    const handle = await locks.acquire(['m3', 'm1', 'm2', 'm1']);
    expect(handle.keys).toEqual(['m1', 'm2', 'm3']);
    expect([...handle.fences.keys()]).toEqual(['m1', 'm2', 'm3']);
    expect(handle.fence).toBe(handle.fences.get('m1'));
    await handle.release();
    const afterwards = await other.tryAcquire(['m1', 'm2', 'm3']);
    expect(afterwards).not.toBeNull();
    await afterwards?.release();
  });

  it('renews keys that aged while a multi-key acquisition waited for the others', async () => {
    const locks = await kit.service();
    const other = await kit.service();
    const blocker = await other.acquire('r2');
    setTimeout(() => void blocker.release(), 2_000);
    const handle = await locks.acquire(['r1', 'r2'], { ttlMs: 3_000, timeoutMs: 10_000 });
    // r1's first lease (3 s from the start) has ended by now; the refreshed one has not.
    await sleep(1_500);
    expect(handle.lost).toBe(false);
    expect((await other.inspect('r1'))?.held).toBe(true);
    await handle.release();
  });

  // FINDINGS L18: a renewal answered after the lease it renews ended proves nothing (one that
  // reached MongoDB late with an old clock may have brought the entry back after others held).
  it('a multi-key acquisition gives back a key whose refresh was answered after its lease ended', async () => {
    const other = await kit.service();
    const blocker = await other.acquire('rr2', { ttlMs: 20_000 });
    const sent: { pipeline: unknown; key: unknown; token: unknown }[] = [];
    let answered = false;
    const client = interceptedClient(await kit.client(), async (target, args) => {
      const filter = args[0] as Document;
      const { pipeline, token } = commandOf(args);
      sent.push({ pipeline, key: filter._id, token });
      if (pipeline === RENEW_PIPELINE && filter._id === 'rr1') {
        // rr1's renewals (while rr2 is awaited, then before the hand-out): held past rr1's
        // lease, then let through after a renewal with an old clock brought the dead entry back.
        await sleep(1_200);
        await target.updateOne(
          { _id: 'rr1' as unknown as Document['_id'], 'line.t': token },
          { $set: { 'line.$.e': new Date(Date.now() + 30_000) } },
        );
        const reply = await target.findOneAndUpdate(...args);
        answered = true;
        return reply;
      }
      return target.findOneAndUpdate(...args);
    });
    const locks = await kit.service({ client });
    const acquiring = locks.acquire(['rr1', 'rr2'], { ttlMs: 1_000, timeoutMs: 15_000 });
    const firstRr1 = () => sent.find((command) => command.key === 'rr1')?.token;
    await eventually(() => answered);
    await blocker.release();
    const handle = await acquiring;
    // Given back before the hand-out, and taken again by a new entry.
    expect(
      sent.some((command) => command.pipeline === LEAVE_PIPELINE && command.token === firstRr1()),
    ).toBe(true);
    expect(handle.lost).toBe(false);
    await handle.release();
  });

  it('a key whose lease ended before a multi-key acquisition finished is awaited again, not failed', async () => {
    const other = await kit.service();
    const third = await kit.service();
    // lr1's renewals while lr2 is awaited fail in passing (MongoDB slow for lr1's whole lease).
    let stalled = true;
    const client = interceptedClient(await kit.client(), async (target, args) => {
      const filter = args[0] as Document;
      if (stalled && filter._id === 'lr1' && commandOf(args).pipeline === RENEW_PIPELINE) {
        throw new MongoServerError({ message: 'operation exceeded time limit', code: 262 });
      }
      return target.findOneAndUpdate(...args);
    });
    const locks = await kit.service({ client });
    const blocker = await other.acquire('lr2', { ttlMs: 20_000 });
    const acquiring = locks.acquire(['lr1', 'lr2'], { ttlMs: 1_000, timeoutMs: 15_000 });
    // lr1 is taken at once; its 1 s lease ends while lr2 is awaited, and a third caller takes it.
    const taker = await third.acquire('lr1', { ttlMs: 20_000, timeoutMs: 5_000 });
    stalled = false;
    await blocker.release();
    // Waiting for lr1 again, the call gives lr2 back at once (keys are taken in order), well
    // before lr2's own 1 s lease would end.
    const lr2Free = async () => (await other.inspect('lr2'))?.held === false;
    for (let tries = 0; tries < 8 && !(await lr2Free()); tries++) await sleep(50);
    expect(await lr2Free()).toBe(true);
    await taker.release();
    const handle = await acquiring;
    expect(handle.fences.get('lr1')).toBeGreaterThan(taker.fence);
    expect(handle.lost).toBe(false);
    expect((await other.inspect('lr1'))?.holderId).toBe(locks.holderId);
    await handle.release();
  });

  it('extend renews the lease on demand', async () => {
    const locks = await kit.service();
    const handle = await locks.acquire('extended', { ttlMs: 1_000 });
    await handle.extend(20_000);
    await sleep(1_200);
    expect(handle.lost).toBe(false);
    expect(handle.expiresAt.getTime()).toBeGreaterThan(Date.now() + 15_000);
    expect((await locks.inspect('extended'))?.remainingMs).toBeGreaterThan(15_000);
    await handle.release();
    await handle.release(); // idempotent after success
    await expect(handle.extend()).rejects.toBeInstanceOf(MongoLockError);
  });

  it('maxHoldMs stops a stuck holder: the handle is lost', async () => {
    const locks = await kit.service({ maxHoldMs: 1_500 });
    const handle = await locks.acquire('stuck', { ttlMs: 1_000, renew: true });
    await sleep(1_000);
    expect(handle.lost).toBe(false);
    await sleep(800);
    expect(handle.lost).toBe(true);
    expect(String(handle.signal.reason)).toContain('maxHoldMs');
  });

  it('await using releases at the end of the block', async () => {
    const locks = await kit.service();
    const handle = await locks.acquire('disposable');
    await handle[Symbol.asyncDispose]();
    expect(handle.released).toBe(true);
    expect((await locks.inspect('disposable'))?.held).toBe(false);
  });
});
