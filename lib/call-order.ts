/**
 * Per key, runs steps in call order: each is handed the steps ahead to wait for (bounded as it
 * likes), or undefined when there are none; they settle with the error the last of them failed
 * with (undefined if it did not). One that gives up still holds back those behind it until those
 * ahead settle.
 */
export class CallOrder {
  /** Per key, settles once every step started on it so far has settled. */
  private readonly ahead = new Map<string, Promise<unknown>>();

  async run<T>(key: string, step: (ahead: Promise<unknown> | undefined) => Promise<T>): Promise<T> {
    const { ahead, done } = this.start(key);
    try {
      const result = await step(ahead);
      done();
      return result;
    } catch (error) {
      done(error);
      throw error;
    }
  }

  /** Starts a step on `key` now: the steps ahead, and `done` to call once it settled. */
  start(key: string): {
    ahead: Promise<unknown> | undefined;
    done: (failure?: unknown) => void;
  } {
    const ahead = this.ahead.get(key);
    let settled!: (failure: unknown) => void;
    const own = new Promise<unknown>((resolve) => (settled = resolve));
    const upToMine = Promise.all([ahead, own]).then(([, failure]) => failure);
    this.ahead.set(key, upToMine);
    const done = (failure?: unknown) => {
      settled(failure);
      void upToMine.then(() => {
        if (this.ahead.get(key) === upToMine) this.ahead.delete(key);
      });
    };
    return { ahead, done };
  }

  /** Settles once every step started on `key` so far has; undefined when none is under way. */
  pending(key: string): Promise<unknown> | undefined {
    return this.ahead.get(key);
  }
}
