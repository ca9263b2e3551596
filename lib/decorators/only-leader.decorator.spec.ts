import { firstValueFrom, Observable, of } from 'rxjs';
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

describe('@OnlyLeader on an instance no application made', () => {
  class Job {
    @OnlyLeader('job')
    tick(): number {
      return 1;
    }

    @OnlyLeader('job')
    async run(): Promise<number> {
      return Promise.resolve(1);
    }

    @OnlyLeader('job')
    watch(): Observable<number> {
      return of(1);
    }
  }

  it('fails each call as its method reports failures: a synchronous one throws', async () => {
    const notBound = /^@OnlyLeader on Job\.\w+: the instance belongs to no application/;
    expect(() => new Job().tick()).toThrow(notBound);
    await expect(new Job().run()).rejects.toThrow(notBound);
    await expect(firstValueFrom(new Job().watch())).rejects.toThrow(notBound);
  });
});
