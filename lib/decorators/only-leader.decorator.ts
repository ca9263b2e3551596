import { Logger } from '@nestjs/common';
import { EMPTY, throwError } from 'rxjs';
import { MongoLockError } from '../errors/mongo-lock.error';
import { leaderKey } from '../leadership/leader-key';
import type { LeadershipOptions } from '../leadership/leadership';
import { runInTerm } from '../leadership/term-context';
import { validateTtlMs } from '../options';
import { lockBindingOf } from './lock-bindings';
import { keepMethodIdentity, methodReturn } from './locked.decorator';

const ONLY_LEADER_METADATA = Symbol('MONGO_LOCK:ONLY_LEADER');

/** What `@OnlyLeader` records on a method: the module campaigns for `name` from bootstrap. */
export interface OnlyLeaderMetadata {
  readonly name: string;
  readonly options: LeadershipOptions;
  readonly where: string;
}

export function getOnlyLeaderMetadata(method: unknown): OnlyLeaderMetadata | undefined {
  return typeof method === 'function'
    ? (Reflect.getMetadata(ONLY_LEADER_METADATA, method) as OnlyLeaderMetadata | undefined)
    : undefined;
}

const logger = new Logger('MongoLockModule');

type AnyMethod = (this: unknown, ...args: unknown[]) => unknown;

/**
 * Runs the provider method only while this instance leads `name`; otherwise the call resolves
 * `undefined` (a method returning an Observable completes empty), logged at debug level. The
 * module campaigns for every name used, from application bootstrap to shutdown. Inside,
 * `LockService.currentTerm()` gives the term: its fence for writes, its signal to stop.
 * With the module's `enabled: false` the method always runs (there is no MongoDB to elect by).
 *
 * @example
 * \@Injectable()
 * class Digest {
 *   \@Cron('0 * * * * *')
 *   \@OnlyLeader('digest', { ttlMs: 15_000 })
 *   async send(): Promise<void> {
 *     const term = LockService.currentTerm()!;
 *     await this.mailer.sendDigest({ fence: term.fence, signal: term.signal });
 *   }
 * }
 */
export function OnlyLeader(name: string, options: LeadershipOptions = {}): MethodDecorator {
  leaderKey(name);
  if (options.ttlMs !== undefined) validateTtlMs('ttlMs', options.ttlMs);
  return (target, propertyKey, descriptor) => {
    const where = `${(target as { constructor: { name: string } }).constructor.name}.${String(propertyKey)}`;
    const original = descriptor.value as unknown;
    if (typeof original !== 'function') {
      throw new MongoLockError(`@OnlyLeader on ${where}: not a method`);
    }
    const observable = methodReturn(target, propertyKey, original as AnyMethod) === 'observable';
    const notBound = () =>
      new MongoLockError(
        `@OnlyLeader on ${where}: the instance belongs to no application with MongoLockModule (a singleton provider Nest created is needed)`,
      );
    const wrapper = function onlyLeader(this: unknown, ...args: unknown[]): unknown {
      const binding = lockBindingOf(this);
      if (!binding) return observable ? throwError(notBound) : Promise.reject(notBound());
      if (!binding.enabled) return (original as AnyMethod).apply(this, args);
      const term = binding.service.leadership(name, options).term;
      if (!term) {
        logger.debug(`${where} skipped: this instance does not lead ${JSON.stringify(name)}`);
        return observable ? EMPTY : Promise.resolve(undefined);
      }
      return runInTerm(term, () => (original as AnyMethod).apply(this, args));
    };
    keepMethodIdentity(original, wrapper);
    const metadata: OnlyLeaderMetadata = { name, options, where };
    Reflect.defineMetadata(ONLY_LEADER_METADATA, metadata, wrapper);
    (descriptor as PropertyDescriptor).value = wrapper;
  };
}
