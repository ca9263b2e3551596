/**
 * Per key, runs steps in call order: each is handed the steps ahead to wait for (bounded as it
 * likes), or undefined when there are none. One that gives up still holds back those behind it
 * until those ahead settle.
 */
export class CallOrder {
  /** Per key, settles once every step started on it so far has settled. */
  private readonly ahead = new Map<string, Promise<void>>();

  async run<T>(key: string, step: (ahead: Promise<void> | undefined) => Promise<T>): Promise<T> {
    const { ahead, done } = this.start(key);
    try {
      return await step(ahead);
    } finally {
      done();
    }
  }

  /** Starts a step on `key` now: the steps ahead, and `done` to call once it settled. */
  start(key: string): { ahead: Promise<void> | undefined; done: () => void } {
    const ahead = this.ahead.get(key);
    let settled!: () => void;
    const own = new Promise<void>((resolve) => (settled = resolve));
    const upToMine = Promise.all([ahead, own]).then(() => undefined);
    this.ahead.set(key, upToMine);
    const done = () => {
      settled();
      void upToMine.then(() => {
        if (this.ahead.get(key) === upToMine) this.ahead.delete(key);
      });
    };
    return { ahead, done };
  }

  /** Settles once every step started on `key` so far has; undefined when none is under way. */
  pending(key: string): Promise<void> | undefined {
    return this.ahead.get(key);
  }
}
