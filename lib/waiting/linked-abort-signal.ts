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
  const controller = new AbortController();
  const present = sources.filter((source): source is AbortSignal => source !== undefined);
  const aborted = present.find((source) => source.aborted);
  if (aborted) {
    controller.abort(aborted.reason);
    return { signal: controller.signal, unlink: () => undefined };
  }
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
