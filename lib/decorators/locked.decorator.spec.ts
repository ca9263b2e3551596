// Observable is imported as a value: the declared return type must be emitted as metadata.
import { Observable, of } from 'rxjs';
import { InvalidLockKeyError, InvalidLockOptionsError } from '../errors';
import { Locked, type LockedOptions } from './locked.decorator';
import { getLockedMetadata } from './locked-metadata';

function optionError(options: unknown): InvalidLockOptionsError {
  try {
    class Job {
      @Locked('job', options as LockedOptions)
      async run(): Promise<void> {}
    }
    void Job;
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    return error as InvalidLockOptionsError;
  }
  throw new Error('expected InvalidLockOptionsError, nothing was thrown');
}

describe('@Locked options, checked when the class is defined', () => {
  it.each<[unknown, string, RegExp]>([
    [{ onBusy: 'fail' }, 'onBusy', /Job\.run: option onBusy must be 'wait' or 'skip'/],
    [{ onBusy: true }, 'onBusy', /option onBusy must be 'wait' or 'skip'/],
    [{ minHoldMs: -1 }, 'minHoldMs', /Job\.run: option minHoldMs must be an integer from 0 to/],
    [{ minHoldMs: 1.5 }, 'minHoldMs', /option minHoldMs must be an integer/],
    [{ minHoldMs: '5s' }, 'minHoldMs', /option minHoldMs must be an integer/],
    [
      { minHoldMs: 2 ** 31 },
      'minHoldMs',
      /option minHoldMs must be an integer from 0 to 2147483647/,
    ],
    [
      { onbusy: 'skip' },
      'onbusy',
      /onbusy is not an option \(did you mean onBusy\?\); the options are ttlMs, timeoutMs, renew, onBusy, minHoldMs/,
    ],
    [{ renew: 'yes' }, 'renew', /option renew must be true, false or renewal options/],
    [{ renew: { intervalRatio: 2 } }, 'renew', /renew.intervalRatio must be a number greater/],
    [{ renew: { enabled: 'no' } }, 'renew', /renew.enabled must be true or false/],
    [{ renew: { intervalRation: 0.5 } }, 'renew', /did you mean renew.intervalRatio/],
  ])('refuses %j, naming the option', (options, option, message) => {
    const error = optionError(options);
    expect(error.option).toBe(option);
    expect(error.message).toMatch(message);
  });

  it.each<LockedOptions>([
    { onBusy: 'skip' },
    { onBusy: 'wait', timeoutMs: 500 },
    { onBusy: 'skip', minHoldMs: 0 },
    { onBusy: 'skip', minHoldMs: 50_000, ttlMs: 10_000, timeoutMs: 0 },
  ])('accepts %j and records it', (options) => {
    class Job {
      @Locked('job', options)
      async run(): Promise<void> {}
    }
    expect(getLockedMetadata(Job.prototype.run)?.options).toEqual(options);
  });
});

describe('@Locked metrics label', () => {
  it('is the method when the templates are too long for a label', () => {
    const long = `report:${'x'.repeat(200)}:{args.0}`;
    class Reports {
      @Locked(long)
      async build(): Promise<void> {}
      @Locked('report:{args.0}')
      async read(): Promise<void> {}
    }
    // A label over 200 characters would make every call fail `withLock`'s option check.
    expect(getLockedMetadata(Reports.prototype.build)?.metricsLabel).toBe('Reports.build');
    expect(getLockedMetadata(Reports.prototype.read)?.metricsLabel).toBe('report:{args.0}');
  });
});

describe('@Locked tells what a method returns, for the start-up check', () => {
  class Shapes {
    @Locked('s')
    async asyncMethod() {}

    @Locked('s')
    declaredPromise(): Promise<number> {
      return Promise.resolve(1);
    }

    @Locked('s')
    declaredObservable(): Observable<number> {
      return of(1);
    }

    @Locked('s')
    unannotated() {
      return 1;
    }

    @Locked('s')
    declaredValue(): string {
      return 'x';
    }

    @Locked('s')
    declaredVoid(): void {}

    @Locked('s')
    declaredUnion(): Promise<number> | number {
      return 1;
    }
  }

  it.each([
    ['asyncMethod', 'promise'],
    ['declaredPromise', 'promise'],
    ['declaredObservable', 'observable'],
    ['unannotated', 'value'],
    ['declaredValue', 'value'],
    ['declaredVoid', 'value'],
    ['declaredUnion', 'value'],
  ] as const)('%s: %s', (method, returns) => {
    expect(getLockedMetadata(Shapes.prototype[method])?.returns).toBe(returns);
  });

  it('says unknown when the compiler emitted no type metadata', () => {
    class Untyped {
      run() {
        return 1;
      }
    }
    const descriptor = Object.getOwnPropertyDescriptor(Untyped.prototype, 'run')!;
    Locked('u')(Untyped.prototype, 'run', descriptor);
    expect(getLockedMetadata(descriptor.value)?.returns).toBe('unknown');
  });
});

describe('@Locked on a static method', () => {
  it('is refused when the class is defined, saying why', () => {
    const declare = () => {
      class Reports {
        @Locked('reports')
        static async build(): Promise<void> {}
      }
      return Reports;
    };
    expect(declare).toThrow(
      '@Locked on Reports.build: not an instance method (a static method belongs to no provider)',
    );
  });
});

describe('@Locked key templates that can never give a valid key', () => {
  it.each([
    ['a key', () => Locked('a\u0000b:{params.id}')],
    ['a scope', () => Locked('ok:{params.id}', { scope: `${'s'.repeat(600)}:{user.id}` })],
  ])('refuses %s when the class is defined, not on every request', (_label, decorator) => {
    const declare = () => {
      class Orders {
        @decorator()
        async pay(): Promise<void> {}
      }
      return Orders;
    };
    expect(declare).toThrow(InvalidLockKeyError);
    expect(declare).toThrow(/can never give a valid key, whatever its values/);
  });
});

describe('@Locked scope templates longer than a scope can be', () => {
  it('refuses a scope whose text alone passes 200 characters when the class is defined', () => {
    const declare = () => {
      class Orders {
        @Locked('ok:{params.id}', { scope: `tenant-${'x'.repeat(200)}:{user.id}` })
        async pay(): Promise<void> {}
      }
      return Orders;
    };
    expect(declare).toThrow(InvalidLockOptionsError);
    expect(declare).toThrow(
      /scope .* can never be a valid scope: .* at least 209 characters, over 200/,
    );
  });
});

describe('@Locked on an async generator method', () => {
  it('is refused when the class is defined, saying that async generators are not supported', () => {
    const declare = () => {
      class Feed {
        @Locked('feed:{args.0}')
        async *items(): AsyncGenerator<number> {
          yield 1;
        }
      }
      return Feed;
    };
    expect(declare).toThrow(
      '@Locked on Feed.items: async generator methods (async *) are not supported',
    );
  });
});
