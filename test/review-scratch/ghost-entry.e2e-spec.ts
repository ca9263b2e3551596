// D2: a join retried after an unknown outcome, answered by DocumentNotFoundError (the document
// no longer meets `where`), forgets the entry its first try made: the document stays locked by
// nobody for the whole lease.
import type { Document } from 'mongodb';
import { DocumentNotFoundError } from '../../lib/errors';
import { ReplyDelayProxy } from '../support/reply-delay-proxy';
import { scratchSuite, settle, sleep } from './helpers';

jest.setTimeout(30_000);

describe('D2 a retried join that ends in DocumentNotFoundError (v2)', () => {
  const { kit, state, service } = scratchSuite();

  it('leaves the entry its first, unanswered try made', async () => {
    const target = new URL(kit.mongo.uri);
    const proxy = new ReplyDelayProxy({ host: target.hostname, port: Number(target.port) });
    await proxy.start();
    try {
      const locks = (
        await service({
          operationTimeoutMs: 300,
          uri: `mongodb://127.0.0.1:${proxy.port}/?directConnection=true`,
        })
      ).documents(state.name);
      await locks.inspect('a');
      const held = proxy.holdNextReply('findAndModify', 1_500);
      const acquiring = settle(
        locks.acquire('a', { where: { tenant: 't1' }, ttlMs: 20_000, timeoutMs: 5_000 }),
      );
      await held; // the join landed (our entry holds); its reply is late: outcome unknown
      await state.docs.updateOne({ _id: 'a' as never }, { $set: { tenant: 't2' } });
      expect(await acquiring).toBeInstanceOf(DocumentNotFoundError); // the retry's answer
      await sleep(1_000);
      const lock = (await state.docs.findOne({ _id: 'a' as never }))?._lock as Document;
      const live = (lock.line as { e: Date }[]).filter((entry) => entry.e.getTime() > Date.now());
      // Observed: one live entry (ours, holding) for 20 s, no handle anywhere.
      expect(live).toEqual([]);
    } finally {
      await kit.cleanup();
      await proxy.stop();
    }
  });
});
