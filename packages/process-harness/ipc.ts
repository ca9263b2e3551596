import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import * as path from 'node:path';
import { TS_CHILD_FLAGS } from './ts-child';

/** Operation name → [argument, result]. */
export type OpMap = { [op: string]: [unknown, unknown] };

type Reply =
  | { type: 'reply'; id: number; ok: true; result: unknown }
  | { type: 'reply'; id: number; ok: false; error: string; errorName: string };
type EventMessage = { type: 'event'; event: unknown };
type Request = { id: number; op: string; args: unknown };

const repoRoot = path.resolve(__dirname, '../..');

/** Error raised in a child, re-thrown in the parent with the child's error name. */
export class ChildCallError extends Error {
  constructor(
    message: string,
    readonly errorName: string,
  ) {
    super(message);
  }
}

export interface ForkOptions<Event> {
  label: string;
  env?: Record<string, string>;
  /** Extra node flags, e.g. `--expose-gc`. */
  nodeFlags?: string[];
  onEvent?: (event: Event) => void;
}

/** A TypeScript child process (through ts-node) answering typed calls over IPC. */
export class IpcChild<Ops extends OpMap, Event = never> {
  readonly exited: Promise<void>;
  private readonly pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void }
  >();
  private nextId = 1;

  private constructor(
    readonly label: string,
    private readonly child: ChildProcess,
    onEvent: (event: Event) => void,
  ) {
    child.on('message', (message: Reply | EventMessage) => {
      if (message.type === 'event') return onEvent(message.event as Event);
      const call = this.pending.get(message.id);
      this.pending.delete(message.id);
      if (!call) return;
      if (message.ok) call.resolve(message.result);
      else call.reject(new ChildCallError(`${label}: ${message.error}`, message.errorName));
    });
    this.exited = once(child, 'exit').then(() => {
      for (const call of this.pending.values()) call.reject(new Error(`${label} exited`));
      this.pending.clear();
    });
  }

  static fork<Ops extends OpMap, Event = never>(
    entry: string,
    options: ForkOptions<Event>,
  ): IpcChild<Ops, Event> {
    const child = fork(entry, [], {
      cwd: repoRoot,
      execArgv: [...(options.nodeFlags ?? []), ...TS_CHILD_FLAGS],
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    return new IpcChild<Ops, Event>(options.label, child, options.onEvent ?? (() => undefined));
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  call<K extends keyof Ops & string>(op: K, args: Ops[K][0]): Promise<Ops[K][1]> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve: resolve, reject });
      this.child.send({ id, op, args } satisfies Request, (error) => {
        if (!error) return;
        this.pending.delete(id);
        reject(error);
      });
    });
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Runs `closeOp` if the child still answers, then makes sure the process is gone. */
  async stop(closeOp?: keyof Ops & string): Promise<void> {
    if (this.alive && closeOp) {
      this.child.kill('SIGCONT');
      let giveUp: NodeJS.Timeout | undefined;
      await Promise.race([
        this.call(closeOp, {}).catch(() => undefined),
        new Promise((resolve) => (giveUp = setTimeout(resolve, 5000))),
      ]);
      clearTimeout(giveUp);
    }
    // The child exits when its IPC channel closes; a stuck one is killed.
    if (this.child.connected) this.child.disconnect();
    const timer = setTimeout(() => this.alive && this.child.kill('SIGKILL'), 3000);
    await this.exited;
    clearTimeout(timer);
  }
}

/** Child side: answers the parent's calls with `handlers` and can push events. */
export function serveIpc<Ops extends OpMap>(handlers: {
  [K in keyof Ops]: (args: Ops[K][0]) => Promise<Ops[K][1]>;
}): { emit: (event: unknown) => void } {
  const send = (message: Reply | EventMessage) => process.send?.(message);
  process.on('message', (request: Request) => {
    const handler = handlers[request.op] as ((args: unknown) => Promise<unknown>) | undefined;
    void (async () => {
      try {
        if (!handler) throw new Error(`unknown operation ${request.op}`);
        send({ type: 'reply', id: request.id, ok: true, result: await handler(request.args) });
      } catch (error) {
        const err = error instanceof Error ? error : new Error(String(error));
        send({ type: 'reply', id: request.id, ok: false, error: err.message, errorName: err.name });
      }
    })();
  });
  // A child must never outlive its parent (a crashed run would leave it holding locks).
  process.on('disconnect', () => process.exit(0));
  return { emit: (event) => send({ type: 'event', event }) };
}
