import { Long, type CommandStartedEvent, type Document } from 'mongodb';
import { firstValueFrom } from 'rxjs';
import { OnlyLeader } from '../../lib/decorators/only-leader.decorator';
import {
  InvalidLockOptionsError,
  LeadershipResignedError,
  LockNotAcquiredError,
} from '../../lib/errors';
import { LEADER_KEY_PREFIX } from '../../lib/leadership/leader-key';
import type { LeaderTerm } from '../../lib/leadership/leader-term';
import { countCommands, eventually, LockTestKit, sleep } from '../lock-service/lock-test-kit';

jest.setTimeout(30_000);

/** Settles `promise` or says it is still pending after `ms`. */
async function within<T>(
  promise: Promise<T>,
  ms: number,
): Promise<T | 'pending' | { error: unknown }> {
  return Promise.race([
    promise.then(
      (value) => value,
      (error: unknown) => ({ error }),
    ),
    sleep(ms).then(() => 'pending' as const),
  ]);
}

describe('leadership: a term lasts as long as it is renewed', () => {
  const kit = LockTestKit.forSuite();

  it('a leader is not deposed by maxHoldMs (default 10 min) while its renewals succeed', async () => {
    // maxHoldMs is the module-wide limit for ordinary locks; 1.5 s here stands for the default 10 min.
    const a = await kit.service({ holderId: 'A', maxHoldMs: 1_500 });
    const term = await a.leadership('long-lived', { ttlMs: 1_000 }).campaign();
    await sleep(2_500);
    const state = await a.inspect(`${LEADER_KEY_PREFIX}long-lived`);
    expect(term.signal.aborted ? String(term.signal.reason) : 'still leading').toBe(
      'still leading',
    );
    // And, lost that way, its lease is not given back: nobody can lead until it runs out.
    expect(state?.held && state.holderId === 'A').toBe(true);
  });

  it('with terms$ and a second candidate, leadership does not churn every maxHoldMs', async () => {
    const a = await kit.service({ holderId: 'A', maxHoldMs: 1_500 });
    const b = await kit.service({ holderId: 'B', maxHoldMs: 1_500 });
    const aTerms: LeaderTerm[] = [];
    const bTerms: LeaderTerm[] = [];
    const subA = a.leadership('churn', { ttlMs: 1_000 }).terms$.subscribe((t) => aTerms.push(t));
    await eventually(() => aTerms.length === 1);
    const subB = b.leadership('churn', { ttlMs: 1_000 }).terms$.subscribe((t) => bTerms.push(t));
    await sleep(4_000);
    subA.unsubscribe();
    subB.unsubscribe();
    expect(aTerms.length + bTerms.length).toBe(1);
  });

  it('campaign({ timeoutMs: 0 }) wins a free leadership (one attempt, as tryAcquire does)', async () => {
    const a = await kit.service({ holderId: 'A' });
    const outcome = await a
      .leadership('zero-timeout')
      .campaign({ timeoutMs: 0 })
      .catch((error: unknown) => error);
    expect(outcome).not.toBeInstanceOf(LockNotAcquiredError);
    await sleep(200);
    // ...and the key is free afterwards either way (nothing leaked).
    if (outcome instanceof Error) {
      expect((await a.inspect(`${LEADER_KEY_PREFIX}zero-timeout`))?.held ?? false).toBe(false);
    }
  });

  it('campaign({ timeoutMs: 0 }) on a leadership held elsewhere is one write that leaves nothing in line', async () => {
    const a = await kit.service({ holderId: 'A' });
    const term = await a.leadership('held-elsewhere').campaign();
    const client = await kit.client({ monitorCommands: true });
    const b = await kit.service({ holderId: 'B', client });
    const key = `${LEADER_KEY_PREFIX}held-elsewhere`;
    const writes: Document[] = [];
    client.on('commandStarted', (event: CommandStartedEvent) => {
      const query = event.command.query as Document | undefined;
      if (event.commandName === 'findAndModify' && query?._id === key) writes.push(event.command);
    });
    const outcome = await b
      .leadership('held-elsewhere')
      .campaign({ timeoutMs: 0 })
      .catch((error: unknown) => error);
    // Closing waits for the leaves under way in the background.
    await b.close();

    expect(outcome).toBeInstanceOf(LockNotAcquiredError);
    // A try, as tryAcquire sends: no join and no leave after it.
    expect(writes).toHaveLength(1);
    const doc = (await kit.rawLocks()).find((raw) => raw._id === key);
    expect((doc?.line as { h: string }[]).map((entry) => entry.h)).toEqual(['A']);
    await term.resign();
  });

  it('a campaign that waits, called while a zero-timeout one tries, shares the term it wins', async () => {
    const a = await kit.service({ holderId: 'A' });
    const leadership = a.leadership('try-then-wait');
    const trying = leadership.campaign({ timeoutMs: 0 });
    const waiting = leadership.campaign({ timeoutMs: 5_000 });
    const [tried, waited] = await Promise.all([trying, waiting]);
    expect(waited).toBe(tried);
    const state = await a.inspect(`${LEADER_KEY_PREFIX}try-then-wait`);
    expect(state?.waiting ?? 0).toBe(0);
    await tried.resign();
  });

  it('a campaign that waits, called while a zero-timeout one tries, stands in line once the try is refused', async () => {
    const a = await kit.service({ holderId: 'A' });
    const held = await a.leadership('try-refused-then-wait').campaign();
    const b = await kit.service({ holderId: 'B' });
    const leadership = b.leadership('try-refused-then-wait');
    const trying = leadership.campaign({ timeoutMs: 0 }).catch((error: unknown) => error);
    const waiting = leadership.campaign({ timeoutMs: 10_000 });
    expect(await trying).toBeInstanceOf(LockNotAcquiredError);
    const key = `${LEADER_KEY_PREFIX}try-refused-then-wait`;
    await eventually(async () => (await a.inspect(key))?.waiting === 1, 3_000);
    await held.resign();
    const term = await waiting;
    expect(term.active).toBe(true);
    await term.resign();
  });

  it('a short campaign timeout (10 ms) on a free leadership wins too', async () => {
    const a = await kit.service({ holderId: 'A' });
    const outcome = await a
      .leadership('short-timeout')
      .campaign({ timeoutMs: 10 })
      .catch((error: unknown) => error);
    expect(outcome).not.toBeInstanceOf(LockNotAcquiredError);
  });

  it('a timeoutMs above the timer limit (2^31 ms) is refused or honoured, not turned into 1 ms', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const term = await a.leadership('huge-timeout').campaign();
    const campaigning = b.leadership('huge-timeout').campaign({ timeoutMs: 2 ** 31 });
    const outcome = await within(campaigning, 500);
    if (outcome !== 'pending') {
      expect((outcome as { error: unknown }).error).toBeInstanceOf(InvalidLockOptionsError);
    }
    await term.resign();
    if (outcome === 'pending') await (await campaigning).resign();
  });

  it('a bad timeoutMs is an InvalidLockOptionsError, as everywhere else', async () => {
    const a = await kit.service();
    for (const timeoutMs of [-1, Number.NaN, 1.5, Number.POSITIVE_INFINITY]) {
      await expect(a.leadership('bad-timeout').campaign({ timeoutMs })).rejects.toBeInstanceOf(
        InvalidLockOptionsError,
      );
    }
  });

  it('a campaign with a non-AbortSignal signal leaves no candidate behind (no zombie leader later)', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const term = await a.leadership('zombie').campaign();
    await expect(
      b.leadership('zombie').campaign({ signal: {} as AbortSignal, timeoutMs: 10_000 }),
    ).rejects.toThrow();
    await term.resign();
    await sleep(500);
    expect(b.leadership('zombie').isLeader).toBe(false);
    expect((await a.inspect(`${LEADER_KEY_PREFIX}zombie`))?.held ?? false).toBe(false);
  });

  it('a terms$ subscriber that takes the term and leaves does not end the term a campaign() waits for', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const held = await a.leadership('ended-term').campaign();
    const campaigning = b.leadership('ended-term').campaign();
    // Another part of b's app takes one term from terms$ (firstValueFrom unsubscribes at once).
    const fromTerms = firstValueFrom(b.leadership('ended-term').terms$);
    await sleep(100);
    await held.resign();
    const term = await campaigning;
    expect(await fromTerms).toBe(term);
    expect(term.active).toBe(true);
    await term.resign();
  });

  it('a terms$ subscriber that leaves while a campaign() waits leaves it in line, not rejected', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const held = await a.leadership('two-users').campaign();
    const campaigning = b.leadership('two-users').campaign();
    b.leadership('two-users').terms$.subscribe().unsubscribe();
    await sleep(100);
    await held.resign();
    const term = await campaigning;
    expect(term.active).toBe(true);
    expect(term.fence).toBeGreaterThan(held.fence);
    await term.resign();
  });

  it('resign() rejects a campaign() still waiting with LeadershipResignedError', async () => {
    const a = await kit.service({ holderId: 'A' });
    const b = await kit.service({ holderId: 'B' });
    const held = await a.leadership('resigned').campaign();
    const campaigning = b.leadership('resigned').campaign();
    await sleep(50);
    await b.leadership('resigned').resign();
    await expect(campaigning).rejects.toBeInstanceOf(LeadershipResignedError);
    await held.resign();
  });

  it('no options is null or undefined; anything but an object is refused, never a TypeError', async () => {
    const a = await kit.service({ holderId: 'A' });
    const term = await a.leadership('nulls', null as never).campaign(null);
    expect(term.active).toBe(true);
    await term.resign();
    let thrown: unknown;
    const refused = (() => {
      try {
        return a.leadership('nulls').campaign('soon' as never);
      } catch (error) {
        thrown = error;
        return undefined;
      }
    })();
    expect(thrown).toBeUndefined();
    await expect(refused).rejects.toBeInstanceOf(InvalidLockOptionsError);
    expect(() => a.leadership('numbers', 5 as never)).toThrow(InvalidLockOptionsError);
    expect(() => OnlyLeader('numbers', [] as never)).toThrow(InvalidLockOptionsError);
  });

  it("a signal kept by the leader's work is aborted at its first look after a pause past the lease", async () => {
    const a = await kit.service({ holderId: 'A' });
    const term = await a.leadership('paused', { ttlMs: 1_000 }).campaign();
    const { signal } = term; // kept, as the work it is handed to keeps it
    const deadline = term.expiresAt.getTime();
    // The work's own timer, due before the keeper's deadline timer.
    const seen = new Promise<{ aborted: boolean; pastDeadlineMs: number }>((resolve) => {
      setTimeout(
        () => resolve({ aborted: signal.aborted, pastDeadlineMs: Date.now() - deadline }),
        200,
      );
    });
    const resumeAt = performance.now() + 1_600;
    while (performance.now() < resumeAt); // paused past the whole lease: no timer runs
    const { aborted, pastDeadlineMs } = await seen;
    expect(pastDeadlineMs).toBeGreaterThan(0);
    expect(aborted).toBe(true);
    expect(term.active).toBe(false);
  });

  it('a campaign on a leader key whose line is full asks again once a second, not at once', async () => {
    const key = `${LEADER_KEY_PREFIX}crowded`;
    const raw = await kit.client();
    const now = Date.now();
    // 1,000 live entries of another process: the most a line takes.
    await raw
      .db(kit.mongo.dbName)
      .collection<Document>(`${kit.collectionName}_line`)
      .insertOne({
        _id: key as never,
        f: Long.fromNumber(now + 1_000),
        line: Array.from({ length: 1_000 }, (_, i) => ({
          t: `ghost-${i}`,
          f: Long.fromNumber(now + i),
          e: new Date(now + 60_000),
          h: 'ghost',
        })),
        lead: null,
        gcAt: null,
      });
    const client = await kit.client({ monitorCommands: true });
    const a = await kit.service({ holderId: 'A', client });
    const writes = countCommands(client);
    const outcome = await a
      .leadership('crowded')
      .campaign({ timeoutMs: 2_500 })
      .catch((error: unknown) => error);
    expect(outcome).toBeInstanceOf(LockNotAcquiredError);
    // The look, the wait refused at once, then a wait a second (each up to two writes): about
    // seven, not one per round trip.
    expect(writes.names.filter((name) => name === 'findAndModify').length).toBeLessThanOrEqual(10);
  });
});
