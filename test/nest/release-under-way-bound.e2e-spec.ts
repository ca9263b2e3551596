// A `@Locked` call waits for a release its process has under way on one of its keys (an
// Observable's caller left, an @Sse client went away) before it takes the lock, so as not to
// find its own lock held. With MongoDB out of reach that wait is bounded by the release's
// `operationTimeoutMs`, then the call's own bound (`timeoutMs` + 1 s) follows
// (outages-and-shutdown.md): never longer.
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { firstValueFrom, Observable } from 'rxjs';
import { Locked, LockStoreUnavailableError } from '../../lib';
import { FaultProxy, passThrough, proxiedUri, proxyTarget } from '../support/fault-proxy';
import { LOAD_SLACK_MS } from '../support/load-slack';
import { startTestMongo, type TestMongo } from '../support/mongo';
import { lockModule, startAppContext } from './support/nest-apps';

jest.setTimeout(60_000);

const operationTimeoutMs = 6_000;

@Injectable()
class Feed {
  @Locked('feed:{args.0}')
  watch(_id: string): Observable<string> {
    return new Observable<string>((subscriber) => subscriber.next('first'));
  }

  @Locked('feed:{args.0}', { timeoutMs: 0 })
  async once(_id: string): Promise<string> {
    return 'once';
  }
}

describe('a @Locked call behind its process’s release under way, MongoDB out of reach', () => {
  let mongo: TestMongo;
  let proxy: FaultProxy;
  let app: INestApplicationContext;

  beforeAll(async () => {
    mongo = await startTestMongo();
    proxy = new FaultProxy(proxyTarget(mongo.uri));
    await proxy.start();
    app = await startAppContext({
      imports: [lockModule(mongo, { uri: proxiedUri(mongo.uri, proxy.port), operationTimeoutMs })],
      providers: [Feed],
    });
  });

  afterAll(async () => {
    proxy?.setMode(passThrough);
    await app?.close();
    await proxy?.stop();
    await mongo?.stop();
  });

  it('settles within the release’s operationTimeoutMs, then timeoutMs + 1 s', async () => {
    const feed = app.get(Feed);
    // The caller leaves with its first value: the lock is released in the background.
    await expect(firstValueFrom(feed.watch('1'))).resolves.toBe('first');
    proxy.setMode({ blackHole: 'release' });
    const startedAt = performance.now();
    const outcome = await feed.once('1').catch((error: unknown) => error);
    const tookMs = performance.now() - startedAt;
    expect(outcome).toBeInstanceOf(LockStoreUnavailableError);
    // The release's bound, then timeoutMs 0 + 1 s.
    expect(tookMs).toBeLessThan(operationTimeoutMs + 1_000 + LOAD_SLACK_MS);
  });
});
