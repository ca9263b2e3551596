import { InvalidLockOptionsError } from '../../lib/errors';
import { LockService } from '../../lib/lock.service';
import { LockTestKit } from './lock-test-kit';

// docs/options.md: give `uri` or `client`; a bad value fails naming the option. Options built
// from configuration often carry `client: null` next to a `uri`: the error said "got both",
// though no client was given.
describe('module options: uri with client null', () => {
  const kit = LockTestKit.forSuite();

  it('does not say both were given when client is null', () => {
    const make = () => new LockService({ uri: kit.mongo.uri, client: null } as never);
    expect(make).toThrow(InvalidLockOptionsError);
    expect(make).toThrow('client must be a MongoClient, or undefined, got null');
  });
});
