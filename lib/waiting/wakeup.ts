import { MAX_TIMER_MS } from '../options';

/**
 * A sleep that something else can cut short. One sleeper at a time: the head of a key's
 * queue, or one `waitForRelease`.
 */
export class Wakeup {
  private cutShort: (() => void) | undefined;

  /** Resolves `true` when woken by {@link wake}, `false` when `delayMs` passed. */
  sleep(delayMs: number): Promise<boolean> {
    this.cutShort?.();
    return new Promise((resolve) => {
      const timer = setTimeout(
        () => {
          this.cutShort = undefined;
          resolve(false);
        },
        Math.min(Math.max(0, Math.ceil(delayMs)), MAX_TIMER_MS),
      );
      this.cutShort = () => {
        clearTimeout(timer);
        this.cutShort = undefined;
        resolve(true);
      };
    });
  }

  wake(): void {
    this.cutShort?.();
  }
}
