import type { MongoLockModuleOptions } from '../../lib/interfaces/mongo-lock-options.interface';
import type { LockService } from '../../lib/lock.service';
import { FaultProxy, proxiedUri, proxyTarget } from '../support/fault-proxy';
import type { LockTestKit } from '../lock-service/lock-test-kit';

/**
 * Services of a suite whose commands go through one fault proxy (started at the first, stopped
 * after each test), so that a test can cut them off or slow them down.
 */
export function proxiedServices(kit: LockTestKit, operationTimeoutMs: number) {
  let proxy: FaultProxy | undefined;
  afterEach(async () => {
    await proxy?.stop();
    proxy = undefined;
  });
  return {
    /** The proxy of the current test; a service must have been created first. */
    get proxy(): FaultProxy {
      if (!proxy) throw new Error('no proxied service yet in this test');
      return proxy;
    },
    async service(extra: Partial<MongoLockModuleOptions> = {}): Promise<LockService> {
      proxy ??= new FaultProxy(proxyTarget(kit.mongo.uri));
      await proxy.start();
      return kit.service({
        uri: proxiedUri(kit.mongo.uri, proxy.port),
        operationTimeoutMs,
        ...extra,
      });
    },
  };
}
