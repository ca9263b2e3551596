// The benchmark worker process: one entry point for every kind of worker, answering the
// operations of bench/worker-protocol.ts over IPC. Which of them it serves depends on how the
// suite starts it (`startVariants`, `startModes` or `scale`); `close` closes whatever was started.
import { serveIpc } from '../packages/process-harness/ipc';
import type { WorkerOps } from './worker-protocol';
import { closeModeLoops, modeLoopOps } from './workers/mode-loops';
import { waitAtScale } from './workers/scale';
import { closeVariantLocks, variantLockOps } from './workers/variant-locks';

serveIpc<WorkerOps>({
  ...variantLockOps,
  ...modeLoopOps,
  scale: waitAtScale,
  async close() {
    await closeVariantLocks();
    await closeModeLoops();
    return { closed: true };
  },
});
