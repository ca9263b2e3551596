import { setMaxListeners } from 'node:events';

/** A signal that aborts when any source does, and that can be detached from them. */
export interface LinkedAbortSignal {
  readonly signal: AbortSignal;
  /** Detaches from the sources; call when the wait is over. */
  unlink(): void;
}

/**
 * Like `AbortSignal.any`, but detachable: a wait links its caller's signal with the
 * service's long-lived closing signal, and must not leave a listener on it per call.
 *
 * @example
 * const linked = linkAbortSignals([options.signal, closing.signal]);
 * try { await wait(linked.signal); } finally { linked.unlink(); }
 */
export function linkAbortSignals(sources: readonly (AbortSignal | undefined)[]): LinkedAbortSignal {
  const present = sources.filter((source): source is AbortSignal => source !== undefined);
  const aborted = present.find((source) => source.aborted);
  if (aborted) return { signal: AbortSignal.abort(aborted.reason), unlink: () => undefined };
  const controller = new AbortController();
  const listeners = present.map((source) => {
    const listener = () => {
      unlink();
      controller.abort(source.reason);
    };
    source.addEventListener('abort', listener, { once: true });
    return { source, listener };
  });
  function unlink() {
    for (const { source, listener } of listeners) source.removeEventListener('abort', listener);
  }
  return { signal: controller.signal, unlink };
}

/**
 * Links callers' signals with a service's closing signal, one link per caller signal shared by
 * its calls under way: thousands of waits may park on one closing signal, and each link costs
 * a signal and a listener on each source.
 */
export class SharedSignalLinks {
  private readonly links = new Map<AbortSignal, { linked: LinkedAbortSignal; calls: number }>();

  constructor(private readonly base: AbortSignal) {}

  /** `signal` linked with the base signal; `unlink` it once the call is over. */
  link(signal: AbortSignal | undefined): LinkedAbortSignal {
    if (signal === undefined || signal === this.base) {
      return { signal: this.base, unlink: () => undefined };
    }
    let link = this.links.get(signal);
    if (!link) {
      link = { linked: linkAbortSignals([signal, this.base]), calls: 0 };
      // Every wait of the calls sharing it listens on it.
      setMaxListeners(0, link.linked.signal);
      this.links.set(signal, link);
    }
    link.calls += 1;
    let unlinked = false;
    const unlink = () => {
      if (unlinked) return;
      unlinked = true;
      link.calls -= 1;
      if (link.calls > 0) return;
      link.linked.unlink();
      this.links.delete(signal);
    };
    return { signal: link.linked.signal, unlink };
  }

  /** Caller signals linked now (each with calls under way). */
  get size(): number {
    return this.links.size;
  }
}
