import type { LockHandle } from './lock-handle';
import { heldLocksOf, innermostHeldLock, runWithHeldLock } from './lock-context';

const handle = (key: string, released = false) =>
  ({ key, keys: [key], released }) as unknown as LockHandle;

describe('lock context', () => {
  const service = {};
  const otherService = {};

  it('is empty outside any lock', () => {
    expect(innermostHeldLock()).toBeUndefined();
    expect(heldLocksOf(service)).toEqual([]);
  });

  it('follows the async context, innermost first, per service', async () => {
    const outer = handle('a');
    const inner = handle('b');
    const foreign = handle('c');
    await runWithHeldLock(service, outer, async () => {
      await Promise.resolve();
      await runWithHeldLock(otherService, foreign, () =>
        runWithHeldLock(service, inner, async () => {
          await new Promise((resolve) => setTimeout(resolve, 1));
          expect(innermostHeldLock()).toBe(inner);
          expect(heldLocksOf(service)).toEqual([inner, outer]);
          expect(heldLocksOf(otherService)).toEqual([foreign]);
        }),
      );
      expect(innermostHeldLock()).toBe(outer);
    });
    expect(innermostHeldLock()).toBeUndefined();
  });

  it('skips released handles', () => {
    const released = handle('a', true);
    runWithHeldLock(service, released, () => {
      expect(innermostHeldLock()).toBeUndefined();
      expect(heldLocksOf(service)).toEqual([]);
    });
  });
});
