/** A held lock, as the benchmarks see any library's. */
export interface HeldBenchLock {
  release(): Promise<void>;
}

/** The common shape every compared library is driven through, so runs differ only in the lock. */
export interface BenchLock {
  /** Resolves once `key` is held; rejects if it could not be had within `timeoutMs`. */
  acquire(key: string, timeoutMs: number): Promise<HeldBenchLock>;
  close(): Promise<void>;
}

/** The variants compared side by side in the hand-off and throughput suites. */
export const comparedVariants = ['ours', 'ours-poll-10ms', 'ours-poll-100ms', 'mongodash'] as const;
/** Every variant; `ours-local-off` (`localHandOff: false`) runs in the shape matrix only. */
export const variantNames = [...comparedVariants, 'ours-local-off'] as const;
export type VariantName = (typeof variantNames)[number];
