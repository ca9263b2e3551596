import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { VariantName } from '../adapters/bench-lock';
import type { WorkerOps } from '../worker-protocol';
import { entryFor, nodeArgs, repoRoot } from './bench-process';

type Reply =
  | { type: 'reply'; id: number; ok: true; result: unknown }
  | { type: 'reply'; id: number; ok: false; error: string; errorName: string };

/**
 * A benchmark worker process (bench/worker.ts) answering the typed calls of
 * bench/worker-protocol.ts over IPC (the worker side is `serveIpc` of
 * packages/process-harness/ipc.ts), started from compiled JS when the run is compiled.
 */
export class BenchWorker {
  readonly exited: Promise<void>;
  private readonly pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void }
  >();
  private nextId = 1;
  private readonly child: ChildProcess;

  constructor(
    readonly label: string,
    nodeFlags: string[] = [],
  ) {
    const { execArgv, env } = nodeArgs(nodeFlags);
    this.child = fork(entryFor('bench/worker.ts'), [], {
      cwd: repoRoot,
      execArgv,
      env,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child.on('message', (message: Reply | { type: 'event' }) => {
      if (message.type !== 'reply') return;
      const call = this.pending.get(message.id);
      this.pending.delete(message.id);
      if (!call) return;
      if (message.ok) call.resolve(message.result);
      else call.reject(new Error(`${label}: ${message.error}`));
    });
    this.exited = once(this.child, 'exit').then(() => {
      for (const call of this.pending.values()) call.reject(new Error(`${label} exited`));
      this.pending.clear();
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  call<K extends keyof WorkerOps>(op: K, args: WorkerOps[K][0]): Promise<WorkerOps[K][1]> {
    const id = this.nextId++;
    // The reply's type is the protocol's word: the worker answers `op` with `WorkerOps[K][1]`.
    return new Promise<unknown>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ id, op, args }, (error) => {
        if (!error) return;
        this.pending.delete(id);
        reject(error);
      });
    }) as Promise<WorkerOps[K][1]>;
  }

  /** Closes what the worker started if it still answers (5 s at most), then makes sure it is gone. */
  async stop(): Promise<void> {
    const alive = () => this.child.exitCode === null && this.child.signalCode === null;
    if (alive()) {
      let giveUp: NodeJS.Timeout | undefined;
      await Promise.race([
        this.call('close', {}).catch(() => undefined),
        new Promise((resolve) => (giveUp = setTimeout(resolve, 5000))),
      ]);
      clearTimeout(giveUp);
    }
    if (this.child.connected) this.child.disconnect();
    const timer = setTimeout(() => alive() && this.child.kill('SIGKILL'), 3000);
    await this.exited;
    clearTimeout(timer);
  }
}

/**
 * Starts `count` worker processes in parallel, each with every variant ready: processes are
 * started once per run, and the variants then take turns on the same processes.
 */
export async function startVariantWorkers(
  variants: VariantName[],
  count: number,
  connection: { uri: string; dbName: string },
): Promise<BenchWorker[]> {
  return Promise.all(
    Array.from({ length: count }, async (_, index) => {
      const worker = new BenchWorker(`bench#${index}`);
      await worker.call('startVariants', { variants, ...connection });
      return worker;
    }),
  );
}

/** Starts `count` worker processes in parallel, each with one LockService for mode loops. */
export async function startModeWorkers(
  count: number,
  label: string,
  connection: { uri: string; dbName: string },
): Promise<BenchWorker[]> {
  return Promise.all(
    Array.from({ length: count }, async (_, index) => {
      const worker = new BenchWorker(`${label}#${index}`);
      await worker.call('startModes', connection);
      return worker;
    }),
  );
}

export async function useVariant(workers: BenchWorker[], variant: VariantName): Promise<void> {
  await Promise.all(workers.map((worker) => worker.call('use', { variant })));
}

export async function stopWorkers(workers: BenchWorker[]): Promise<void> {
  await Promise.all(workers.map((worker) => worker.stop()));
}
