import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  InvalidLockKeyError,
  InvalidLockOptionsError,
  Locked,
  LockLostError,
  LockService,
  MongoLockModule,
} from '../../lib';
import { LockTestKit } from '../lock-service/lock-test-kit';

jest.setTimeout(60_000);

@Injectable()
class Jobs {
  /** Runs under `job:<name>`, in the owner scope of its tenant, until `gate` opens. */
  @Locked('job:{args.0}', { scope: 'tenant:{args.1}' })
  async run(_job: string, _tenant: string, gate: Promise<void>): Promise<string> {
    await gate;
    return 'done';
  }

  /** A scope function that finds no session: it returns undefined. */
  @Locked('cart:{args.0}', { scope: (context) => context.args[1] as string })
  async checkout(_cart: string, _session?: string): Promise<string> {
    return 'checked out';
  }

  @Locked('report:{args.0}', { scope: (context) => `user:${String(context.args[1])}` })
  async report(_id: string, _user: string, gate: Promise<void>): Promise<string> {
    await gate;
    return 'done';
  }
}

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

describe('@Locked with an owner scope', () => {
  const kit = LockTestKit.forSuite();

  async function start() {
    @Module({ imports: [MongoLockModule.forRoot(kit.options())], providers: [Jobs] })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    return { app, jobs: app.get(Jobs), locks: app.get(LockService) };
  }

  it('releaseScope of a rendered scope ends the calls of that scope only', async () => {
    const { app, jobs, locks } = await start();
    try {
      const first = gate();
      const second = gate();
      const t1 = jobs.run('a', 't1', first.opened);
      const t2 = jobs.run('b', 't2', second.opened);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await locks.releaseScope('tenant:t1')).toBe(1);
      expect((await locks.inspect('job:a'))?.held).toBe(false);
      expect((await locks.inspect('job:b'))?.held).toBe(true);
      first.open();
      second.open();
      await expect(t1).rejects.toBeInstanceOf(LockLostError);
      await expect(t2).resolves.toBe('done');
    } finally {
      await app.close();
    }
  });

  it('a scope function gets the call context', async () => {
    const { app, jobs, locks } = await start();
    try {
      const open = gate();
      const running = jobs.report('r1', 'u7', open.opened);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await locks.releaseScope('user:u7')).toBe(1);
      open.open();
      await expect(running).rejects.toBeInstanceOf(LockLostError);
    } finally {
      await app.close();
    }
  });

  it('fails a call whose scope function returns no scope, as a missing template value, unlocked', async () => {
    const { app, jobs, locks } = await start();
    try {
      const error = await jobs.checkout('c1').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidLockKeyError);
      expect((error as Error).message).toBe(
        '@Locked on Jobs.checkout: its scope function returned undefined, not a scope',
      );
      expect(await locks.inspect('cart:c1')).toBeNull();
      await expect(jobs.checkout('c1', 's1')).resolves.toBe('checked out');
    } finally {
      await app.close();
    }
  });

  it('refuses a scope that is neither a template nor a function, when the class is declared', () => {
    expect(() => {
      class Bad {
        @Locked('k', { scope: 42 as never })
        async run(): Promise<void> {}
      }
      return Bad;
    }).toThrow(InvalidLockOptionsError);
  });
});
