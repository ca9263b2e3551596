// forceRelease(key, { fences }): an operator frees the holders shown, never one that took the
// key after they were shown.
import { InvalidLockOptionsError } from '../../lib/errors';
import type { ForceReleaseOptions } from '../../lib/interfaces';
import { eventually, LockTestKit, sleep } from './lock-test-kit';

jest.setTimeout(60_000);

describe('LockService.forceRelease with fences', () => {
  const kit = LockTestKit.forSuite();

  it('frees nothing when the holder shown has gone and another holds: the new holder keeps it', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const shown = await a.acquire('fenced:changed', { renew: true });
    const fences = (await b.inspect('fenced:changed'))?.holders.map((h) => h.fence);
    expect(fences).toEqual([shown.fence]);
    await shown.release();
    // The new holder is in the operator's own instance (told before the command, if at all)
    // and waited behind another in a second one.
    const here = await b.acquire('fenced:changed', { renew: true });
    const there = a.acquire('fenced:changed', { renew: true, timeoutMs: 10_000 });
    await eventually(() => a.diagnostics.waiters === 1);

    expect(await b.forceRelease('fenced:changed', { fences })).toEqual([]);
    await sleep(200);
    expect(here.lost).toBe(false);
    expect(await b.inspect('fenced:changed')).toMatchObject({ holderId: 'B', fence: here.fence });
    expect((await b.inspect('fenced:changed'))?.waiting).toBe(1);

    // Shown now: freed, and the waiter holds.
    const released = await a.forceRelease('fenced:changed', { fences: [here.fence] });
    expect(released.map((h) => [h.holderId, h.fence])).toEqual([['B', here.fence]]);
    // B hears the command on its change stream.
    await eventually(() => here.lost, 10_000);
    const next = await there;
    expect(next.fence).toBeGreaterThan(here.fence);
    await next.release();
  });

  it('frees the shown holders of a shared lock and leaves one that joined since', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const r1 = await a.acquire('fenced:shared', { mode: 'shared', renew: true });
    const r2 = await b.acquire('fenced:shared', { mode: 'shared', renew: true });
    const fences = (await a.inspect('fenced:shared'))?.holders.map((h) => h.fence) ?? [];
    expect(fences).toEqual([r1.fence, r2.fence]);
    const r3 = await b.acquire('fenced:shared', { mode: 'shared', renew: true });

    const released = await b.forceRelease('fenced:shared', { fences });
    expect(released.map((h) => [h.holderId, h.fence])).toEqual([
      ['A', r1.fence],
      ['B', r2.fence],
    ]);
    expect(r2.lost).toBe(true);
    await eventually(() => r1.lost, 10_000);
    await sleep(200);
    expect(r3.lost).toBe(false);
    const state = await a.inspect('fenced:shared');
    expect(state?.holders.map((h) => [h.holderId, h.fence])).toEqual([['B', r3.fence]]);
    await r3.release();
  });

  it('without fences frees whoever holds the key, as before', async () => {
    const a = await kit.service({ holderId: 'A' });
    const held = await a.acquire('fenced:all', { renew: true });
    const released = await a.forceRelease('fenced:all', {});
    expect(released.map((h) => h.fence)).toEqual([held.fence]);
    expect(held.lost).toBe(true);
  });

  it('refuses bad fences with InvalidLockOptionsError, before anything is written', async () => {
    const a = await kit.service({ holderId: 'A' });
    const held = await a.acquire('fenced:checked', { renew: true });
    const refusal = (options: unknown) =>
      a.forceRelease('fenced:checked', options as ForceReleaseOptions).then(
        () => 'released',
        (error: unknown) =>
          error instanceof InvalidLockOptionsError ? error.message : `other: ${String(error)}`,
      );
    expect(await refusal({ fences: [Number(held.fence)] })).toBe(
      `fences[0] must be a fence as inspect() reports it: a bigint from 0n, got ${Number(held.fence)}`,
    );
    expect(await refusal({ fences: [held.fence, -16n] })).toBe(
      'fences[1] must be a fence as inspect() reports it: a bigint from 0n, got -16n',
    );
    expect(await refusal({ fences: [String(held.fence)] })).toMatch(/^fences\[0\] must be .*got "/);
    expect(await refusal({ fences: [2n ** 70n] })).toMatch(/^fences\[0\] must be/);
    // None listed (a free key was shown): nobody is freed.
    expect(await a.forceRelease('fenced:checked', { fences: [] })).toEqual([]);
    expect(await refusal({ fences: held.fence })).toMatch(/^fences must be an array .*got \d+n$/);
    expect(await refusal({ fences: Array(1001).fill(held.fence) })).toMatch(/^fences must be/);
    expect(await refusal({ fence: [held.fence] })).toMatch(
      /^fence is not an option \(did you mean fences\?\)/,
    );
    expect(await refusal([held.fence])).toBe('options must be an object, got an array');
    expect(held.lost).toBe(false);
    // A handle's own fence names its entry, as the fence shown does.
    expect(await a.forceRelease('fenced:checked', { fences: [held.fence, held.fence] })).toEqual([
      expect.objectContaining({ holderId: 'A', fence: held.fence }),
    ]);
  });
});
