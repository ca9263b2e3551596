import { MongoLockError } from '../errors/mongo-lock.error';
import { OnlyLeader } from './only-leader.decorator';

describe('@OnlyLeader, checked when the class is defined', () => {
  it('refuses a static method, as @Locked does: no provider instance could lead for it', () => {
    const declare = () => {
      class Digest {
        @OnlyLeader('digest')
        static async send(): Promise<void> {}
      }
      return Digest;
    };
    expect(declare).toThrow(MongoLockError);
    expect(declare).toThrow(
      '@OnlyLeader on Digest.send: not an instance method (a static method belongs to no provider)',
    );
  });

  it('refuses a property with its own error, not a TypeError', () => {
    const onlyLeader = OnlyLeader('digest') as unknown as (target: object, name: string) => void;
    const declare = () => onlyLeader(class Digest {}.prototype, 'send');
    expect(declare).toThrow(MongoLockError);
    expect(declare).toThrow('@OnlyLeader on Digest.send: not a method');
  });

  it('refuses two on one method: only the outer name would be stood for', () => {
    const declare = () => {
      class Digest {
        @OnlyLeader('a')
        @OnlyLeader('b')
        async send(): Promise<void> {}
      }
      return Digest;
    };
    expect(declare).toThrow(MongoLockError);
    expect(declare).toThrow('@OnlyLeader is applied twice to Digest.send');
  });

  it('accepts an instance method', () => {
    expect(() => {
      class Digest {
        @OnlyLeader('digest')
        async send(): Promise<void> {}
      }
      return Digest;
    }).not.toThrow();
  });
});
