// A grant handed out to the last caller waiting in a process keeps the process's place in line
// until the confirming renewal lands. Found in review: paths that gave such a grant back before
// that (releaseAllHeld, a release after the renewal failed, a failed multi-key call) handed the
// key straight back to that place, where nobody waits: the key blocked for a grant lease.
import type { LockService } from '../../../lib/lock.service';
import { eventually, LockTestKit, sleep } from '../lock-test-kit';
import { describeWithFailPoints, faultTools, settleWithin } from './kit';
import { LOAD_SLACK_MS } from '../../support/load-slack';

jest.setTimeout(30_000);

describeWithFailPoints(
  'review: a handed-out grant given back before its confirmation lands',
  () => {
    const kit = LockTestKit.forSuite();
    const { failPoint, appClient, rawLock } = faultTools(kit);

    /** B waits alone for `key`, held by A; A releases; B is handed the grant on the event. */
    async function handedOut(
      key: string,
      appName: string,
      failPointData: Record<string, unknown>,
      times = 1,
    ) {
      const a = await kit.service();
      const client = await appClient(appName);
      const b = await kit.service({ client });
      const c = await kit.service();
      const held = await a.acquire(key, { ttlMs: 30_000 });
      const bWaits = b.acquire(key, { ttlMs: 30_000, timeoutMs: 20_000 });
      await eventually(() => b.diagnostics.waiters === 1 && b.diagnostics.streamEstablished, 5_000);
      await eventually(async () => Object.keys((await rawLock(key))?.waiting ?? {}).length === 1);
      await sleep(100);
      // B's next lock write is its confirming renewal (the next `times` ones: its retries too).
      const firedBefore = await failPoint(
        { times },
        { failCommands: ['findAndModify'], appName, ...failPointData },
      );
      await held.release();
      const bHandle = await bWaits;
      return { b, c, bHandle, firedBefore };
    }

    /** Another process takes `key` at once (not after the 5 s grant lease), and releases it. */
    async function takenAtOnce(c: LockService, key: string) {
      const taking = await settleWithin(c.acquire(key, { ttlMs: 5_000, timeoutMs: 3_000 }), 4_000);
      if (taking.status === 'resolved') await taking.value!.release();
      expect(taking.status).toBe('resolved');
      // Not given back, the key is free only when the 5 s grant lease ends: over the bound.
      expect(taking.ms).toBeLessThan(1_000 + LOAD_SLACK_MS);
    }

    it('releaseAllHeld() right after the hand-out frees the key (it does not grant it back to our own stale place)', async () => {
      const { b, c, bHandle, firedBefore } = await handedOut('revoke:k', 'revoke-b', {
        blockConnection: true,
        blockTimeMS: 1_000,
      });
      expect(bHandle.lost).toBe(false);
      // Shutdown / releaseAllHeld while the confirming renewal is still on its way.
      await b.releaseAllHeld();
      const doc = await rawLock('revoke:k');
      // Nobody in B waits any more: the key must be free, not granted back to B's place.
      expect(doc).toMatchObject({ owner: null, grantedTo: null });
      await takenAtOnce(c, 'revoke:k');
      expect(await failPoint('off')).toBe(firedBefore + 1); // the renewal was held up
    });

    it('a confirming renewal that failed (not applied), then release(): the key is freed, not granted back to our own stale place', async () => {
      // Fails the renewal and the driver's retry of it: not applied, store unavailable. One fail
      // point for both: the renewal is sent after the hand-out, so a second one armed then
      // replaced the first before it fired.
      const { c, bHandle, firedBefore } = await handedOut(
        'renewfail:k',
        'renewfail-b',
        { closeConnection: true },
        2,
      );
      await sleep(50);
      // The renewal is retried in 250 ms; the caller is done before that and releases.
      const released = await settleWithin(bHandle.release(), 3_000);
      const doc = await rawLock('renewfail:k');
      expect(released.status).toBe('resolved');
      expect(doc).toMatchObject({ owner: null, grantedTo: null });
      await takenAtOnce(c, 'renewfail:k');
      expect(await failPoint('off')).toBe(firedBefore + 2);
    });

    it('a multi-key call that fails after its first key was handed out and its confirmation failed: that key is freed, not granted back to our own stale place', async () => {
      const appName = 'abandon-b';
      const a = await kit.service();
      const x = await kit.service();
      const b = await kit.service({ client: await appClient(appName) });
      const c = await kit.service();
      const first = await a.acquire('abandon:a', { ttlMs: 30_000 });
      const second = await x.acquire('abandon:b', { ttlMs: 30_000 });
      // Its timeout leaves room for the set-up below on a loaded machine: the release must come
      // while it still waits (else the fail point never fires: checked at the end).
      const bWaits = settleWithin(
        b.acquire(['abandon:a', 'abandon:b'], { ttlMs: 30_000, timeoutMs: 4_000 }),
        10_000,
      );
      await eventually(() => b.diagnostics.waiters === 1 && b.diagnostics.streamEstablished, 5_000);
      await eventually(
        async () => Object.keys((await rawLock('abandon:a'))?.waiting ?? {}).length === 1,
      );
      await sleep(100);
      // B's next lock write confirms 'abandon:a': it and the driver's retry fail unapplied.
      const before = await failPoint(
        { times: 2 },
        { failCommands: ['findAndModify'], appName, closeConnection: true },
      );
      await first.release();
      // 'abandon:b' stays held: the call times out and gives back what it took.
      const outcome = await bWaits;
      expect(outcome.status).toBe('rejected');
      const doc = await rawLock('abandon:a');
      expect(doc).toMatchObject({ owner: null, grantedTo: null });
      await takenAtOnce(c, 'abandon:a');
      await second.release();
      expect(await failPoint('off')).toBe(before + 2);
    });
  },
);
