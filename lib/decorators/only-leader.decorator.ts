import { Logger } from '@nestjs/common';
import {
  defer,
  EMPTY,
  Observable,
  fromEvent,
  isObservable,
  takeUntil,
  takeWhile,
  throwError,
} from 'rxjs';
import { MongoLockError } from '../errors/mongo-lock.error';
import { leaderKey } from '../leadership/leader-key';
import type { LeaderTerm } from '../leadership/leader-term';
import type { LeadershipOptions } from '../leadership/leadership';
import { runInTerm } from '../leadership/term-context';
import { optionsObject } from '../option-checks';
import { validateTtlMs } from '../options';
import { decoratedMethod, methodReturn, replaceMethod } from './decorated-places';
import { lockBindingOf } from './lock-bindings';

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

/**
 * Subscribed under the term (for `currentTerm()`), and completed when the term ends. Each value
 * looks at `term.active` first: after a pause past the deadline, a timer due before the keeper's
 * would otherwise deliver a value outside the term.
 */
function underTerm<T>(source: Observable<T>, term: LeaderTerm): Observable<T> {
  return new Observable<T>((subscriber) => {
    if (!term.active) return subscriber.complete();
    return runInTerm(term, () =>
      source
        .pipe(
          takeWhile(() => term.active),
          takeUntil(fromEvent(term.signal, 'abort')),
        )
        .subscribe(subscriber),
    );
  });
}

/**
 * Runs the provider method only while this instance leads `name`; otherwise the call resolves
 * `undefined` (a synchronous method returns it), logged at debug level. An Observable method is
 * decided when subscribed (else completes empty) and completes when the term ends. The module
 * campaigns for every name from bootstrap to shutdown; inside, `LockService.currentTerm()` gives
 * the term (fence for writes, signal to stop). With `enabled: false` the method always runs and
 * `currentTerm()` is `undefined`. On a controller, start-up fails.
 * @example
 * \@Injectable()
 * class Digest {
 *   \@Cron('0 * * * * *')
 *   \@OnlyLeader('digest', { ttlMs: 15_000 })
 *   async send(): Promise<void> {
 *     const term = LockService.currentTerm();
 *     if (term) await this.mailer.sendDigest({ fence: term.fence, signal: term.signal });
 *   }
 * }
 */
export function OnlyLeader(name: string, options?: LeadershipOptions | null): MethodDecorator {
  leaderKey(name);
  const given = optionsObject(options, ['ttlMs']);
  if (given.ttlMs !== undefined) validateTtlMs('ttlMs', given.ttlMs);
  return (target, propertyKey, descriptor) => {
    const { where, method } = decoratedMethod(
      target,
      propertyKey,
      descriptor,
      '@OnlyLeader',
      (at) => `@OnlyLeader on ${at}: not a method`,
    );
    // The module stands only for the outer name: the inner one would never be led.
    if (getOnlyLeaderMetadata(method)) {
      throw new MongoLockError(`@OnlyLeader is applied twice to ${where}; a method has one name`);
    }
    const returns = methodReturn(target, propertyKey, method);
    const notBound = () =>
      new MongoLockError(
        `@OnlyLeader on ${where}: the instance belongs to no application with MongoLockModule (a singleton provider Nest created is needed)`,
      );
    let warned = false;
    // One that a Promise resolves to runs when subscribed, outside the term: said once.
    const warnOfObservable = (value: unknown) => {
      if (isObservable(value) && !warned) {
        warned = true;
        logger.warn(
          `${where} is @OnlyLeader and its Promise resolved to an Observable, which runs outside the term and is not ended with it; return the Observable itself (not from an \`async\` method) and declare \`: Observable<T>\``,
        );
      }
      return value;
    };
    const wrapper = function onlyLeader(this: unknown, ...args: unknown[]): unknown {
      const binding = lockBindingOf(this);
      // Failing as the method reports failures: a synchronous one throws.
      if (!binding) {
        if (returns === 'value') throw notBound();
        return returns === 'observable' ? throwError(notBound) : Promise.reject(notBound());
      }
      if (!binding.enabled) return method.apply(this, args);
      const leadership = binding.service.leadership(name, given);
      const decide = () => {
        const term = leadership.term;
        if (!term) {
          logger.debug(`${where} skipped: this instance does not lead ${JSON.stringify(name)}`);
          // A synchronous method keeps its shape: `undefined`, not a Promise.
          if (returns === 'observable') return EMPTY;
          return returns === 'value' ? undefined : Promise.resolve(undefined);
        }
        const result = runInTerm(term, () => method.apply(this, args));
        // An Observable, announced or not (no declared type), is kept to the term.
        if (isObservable(result)) return underTerm(result, term);
        // Only a Promise: another thenable (a lazy query) is returned as it is, not run.
        return result instanceof Promise ? result.then(warnOfObservable) : result;
      };
      // An Observable method is decided at subscription, run under the term, and ended with it.
      return returns === 'observable' ? defer(() => decide() as Observable<unknown>) : decide();
    };
    const metadata: OnlyLeaderMetadata = { name, options: given, where };
    const place = { where, decorator: '@OnlyLeader', metadataKey: ONLY_LEADER_METADATA, metadata };
    replaceMethod(target, propertyKey, descriptor, method, wrapper, place);
  };
}
