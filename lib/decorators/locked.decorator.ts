import { type NestInterceptor, type Type, UseInterceptors } from '@nestjs/common';
import { InvalidLockKeyError, InvalidLockOptionsError, MongoLockError } from '../errors';
import { LockedInterceptor } from '../interceptors/locked.interceptor';
import {
  compileLockKeys,
  parseKeyTemplate,
  type LockKeyContext,
  type LockKeySpec,
} from '../keys/key-template';
import { LOCKED_METADATA } from '../mongo-lock.constants';
import { quoteLockKey } from '../keys/lock-key';
import { MESSAGES } from '../mongo-lock.messages';
import { describeValue, integer, refuseUnknownOptions } from '../option-checks';
import { MAX_TIMER_MS } from '../util/timers';
import {
  LOCK_OPTION_DEFAULTS,
  lockMode,
  MAX_METRICS_LABEL_LENGTH,
  MAX_SCOPE_LENGTH,
  MIN_TTL_MS,
  resolveRenewOption,
  resolveTransactionOption,
} from '../options';
import { createLockedMethod } from './locked-method';
import { decoratedMethod, methodReturn, replaceMethod } from './decorated-places';
import { getLockedMetadata, type LockedMetadata, type LockedOptions } from './locked-metadata';
import { getOnlyLeaderMetadata } from './only-leader.decorator';

export type { LockedOptions } from './locked-metadata';

// @nestjs/common's `INTERCEPTORS_METADATA`, which its root does not export.
const INTERCEPTORS_METADATA = '__interceptors__';

const OPTION_NAMES = new Set(
  'ttlMs timeoutMs renew onBusy minHoldMs transaction scope mode permits weight'.split(' '),
);

/** Checks `@Locked`-style options; `names` are the accepted option names. @internal */
export function checkOptions(
  options: LockedOptions,
  where: string,
  names: ReadonlySet<string> = OPTION_NAMES,
  decorator = '@Locked',
): void {
  const bad = (option: string, accepted: string): never => {
    throw new InvalidLockOptionsError(MESSAGES.badOption(where, option, accepted, decorator), {
      option,
    });
  };
  if (typeof options !== 'object' || options === null) bad('options', 'an object');
  try {
    // As withLock refuses them, with the closest name: `ttl is not an option (did you mean ttlMs?)`.
    refuseUnknownOptions(options, [...names]);
  } catch (error) {
    if (!(error instanceof InvalidLockOptionsError)) throw error;
    throw new InvalidLockOptionsError(`${decorator} on ${where}: ${error.message}`, {
      option: error.option,
    });
  }
  if (![undefined, 'wait', 'skip'].includes(options.onBusy)) bad('onBusy', "'wait' or 'skip'");
  const scope = options.scope as unknown;
  if (scope !== undefined && typeof scope !== 'function' && (typeof scope !== 'string' || !scope)) {
    bad('scope', 'a non-empty scope template or a function of the call');
  }
  // The checks `withLock` makes on every call, made once here: a bad option fails at start-up.
  try {
    integer('ttlMs', options.ttlMs, MIN_TTL_MS, MAX_TIMER_MS, 0);
    integer('timeoutMs', options.timeoutMs, 0, MAX_TIMER_MS, 0);
    integer('minHoldMs', options.minHoldMs, 0, MAX_TIMER_MS, 0);
    resolveRenewOption(options.renew, true, LOCK_OPTION_DEFAULTS.renewalIntervalRatio);
    lockMode({ mode: options.mode, permits: options.permits, weight: options.weight });
    resolveTransactionOption(options.transaction);
  } catch (error) {
    if (!(error instanceof InvalidLockOptionsError)) throw error;
    // Named by the option given (`renew`, not `renew.intervalRatio`).
    const [option] = error.option.split('.');
    throw new InvalidLockOptionsError(`${decorator} on ${where}: option ${error.message}`, {
      option,
    });
  }
}

/** A scope template renders like a key template (values escaped); a function's result as is. */
function compileScope(
  scope: LockedOptions['scope'],
  where: string,
): ((context: LockKeyContext) => string) | undefined {
  if (scope === undefined) return undefined;
  if (typeof scope === 'function') {
    return (context) => {
      const named: unknown = scope(context);
      // Taken unscoped, releaseScope could never end it: a template's missing value fails too.
      if (typeof named === 'string') return named;
      throw new InvalidLockKeyError(
        `@Locked on ${where}: its scope function returned ${describeValue(named)}, not a scope`,
      );
    };
  }
  // A scope's limit is shorter than a key's: text no value can shorten fails now, not per call.
  const { parts } = parseKeyTemplate(scope);
  const least = parts.reduce((sum, part) => sum + (part.kind === 'text' ? part.text.length : 1), 0);
  if (least > MAX_SCOPE_LENGTH) {
    throw new InvalidLockOptionsError(
      `@Locked on ${where}: scope ${quoteLockKey(scope)} can never be a valid ` +
        `scope: its text and placeholders take at least ${least} characters, over ${MAX_SCOPE_LENGTH}`,
      { option: 'scope' },
    );
  }
  const render = compileLockKeys(scope, where);
  return (context) => render(context)[0];
}

/**
 * Builds a `@Locked` decorator whose handlers go through `interceptor`, a subclass of
 * {@link LockedInterceptor} with your own hooks (HTTP mapping, key context).
 * @example
 * class TenantLockedInterceptor extends LockedInterceptor {
 *   protected override toLockedException(error: LockNotAcquiredError, seconds: number) {
 *     return new ConflictException('busy, retry later');
 *   }
 * }
 * export const TenantLocked = createLockedDecorator(TenantLockedInterceptor);
 */
export function createLockedDecorator(interceptor: Type<LockedInterceptor> = LockedInterceptor) {
  return function Locked(keys: LockKeySpec, options: LockedOptions = {}): MethodDecorator {
    return (target, propertyKey, descriptor) =>
      decorateLockedMethod(target, propertyKey, descriptor, [interceptor], (where) => {
        checkOptions(options, where);
        const keyTemplates =
          typeof keys === 'string' ? [keys] : typeof keys === 'function' ? [] : keys;
        return {
          resolveKeys: compileLockKeys(keys, where),
          resolveScope: compileScope(options.scope, where),
          // Templates as written are few and fixed: safe as a metric attribute, unlike the keys.
          metricsLabel: typeof keys === 'function' ? where : keyTemplates.join(','),
          templates: [
            ...keyTemplates,
            ...(typeof options.scope === 'string' ? [options.scope] : []),
          ],
          options: { ...options },
        };
      });
  };
}

/** What a locking decorator decides about a method besides its identity and return shape. */
type LockedMethodSpec = Pick<
  LockedMetadata,
  'resolveKeys' | 'resolveScope' | 'metricsLabel' | 'templates' | 'options' | 'document'
>;

/**
 * Replaces the method with its locked wrapper carrying `spec(where)` (`where` is `Class.method`)
 * and adds each of `interceptors` it lacks. Shared by `@Locked` and `@LockedDocument`. @internal
 */
export function decorateLockedMethod<D>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<D>,
  interceptors: readonly Type<NestInterceptor>[],
  spec: (where: string) => LockedMethodSpec,
  decorator = '@Locked',
): TypedPropertyDescriptor<D> {
  const {
    className,
    methodName,
    where,
    method: original,
  } = decoratedMethod(target, propertyKey, descriptor, decorator);
  // Called, it returns its generator at once: a lock would end before the body ran.
  if (original.constructor.name === 'AsyncGeneratorFunction') {
    throw new MongoLockError(MESSAGES.asyncGenerator(where, decorator));
  }
  const earlier = getLockedMetadata(original);
  if (earlier) {
    const bothLocked = decorator === '@Locked' && earlier.document === undefined;
    const message = bothLocked ? MESSAGES.lockedTwice(where) : MESSAGES.twoLockDecorators(where);
    throw new MongoLockError(message);
  }
  // Every instance would lock before @OnlyLeader skips the body, keeping the leader out.
  if (getOnlyLeaderMetadata(original)) {
    throw new MongoLockError(MESSAGES.lockedAboveOnlyLeader(where, decorator));
  }

  const given = spec(where);
  const metadata: LockedMetadata = {
    className,
    methodName,
    where,
    ...given,
    // Labels are at most 200 characters: long templates are named by their method instead.
    metricsLabel:
      given.metricsLabel.length <= MAX_METRICS_LABEL_LENGTH
        ? given.metricsLabel
        : where.slice(0, MAX_METRICS_LABEL_LENGTH),
    returns: methodReturn(target, propertyKey, original),
  };
  const wrapper = createLockedMethod(original, metadata);
  const place = { where, decorator, metadataKey: LOCKED_METADATA, metadata };
  replaceMethod(target, propertyKey, descriptor, original, wrapper, place);
  // One interceptor per handler, whatever the module set-up: locked exactly once.
  for (const interceptor of interceptors)
    useInterceptorOnce(target, propertyKey, descriptor, interceptor);
  return descriptor;
}

/** `UseInterceptors(interceptor)` unless the method has it already (from another decorator). */
export function useInterceptorOnce<D>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<D>,
  interceptor: Type<NestInterceptor>,
): void {
  const present = Reflect.getMetadata(INTERCEPTORS_METADATA, descriptor.value as object) as
    unknown[] | undefined;
  if (present?.includes(interceptor)) return;
  UseInterceptors(interceptor)(target, propertyKey, descriptor);
}

/**
 * Holds a distributed lock while the method runs: acquired before, released after success,
 * error or (for Observables) unsubscription. On controller handlers (HTTP, RPC, WebSocket) and
 * methods of singleton providers. Keys are templates filled from the call (`{params.id}`,
 * `{query.x}`, `{body.a.b}`, `{user.id}`, `{headers.x-tenant}` on HTTP, `{args.0.id}`
 * everywhere) or a function of the call's {@link LockKeyContext}; several keys are taken all or
 * nothing. Busy past `timeoutMs` throws `LockNotAcquiredError` (HTTP 423 with `Retry-After`), or
 * with `onBusy: 'skip'` the call does not run and resolves to `undefined`; a key that cannot be
 * built throws `InvalidLockKeyError` (HTTP 400). A provider method must be `async` or declared
 * to return a `Promise` or `Observable` (a lock is awaited), or the application refuses to
 * start; handlers Nest calls may be synchronous.
 * @example
 * \@Post(':id/pay')
 * \@Locked('order:{params.id}', { timeoutMs: 0 })
 * pay(@Param('id') id: string) { ... }
 *
 * \@Injectable()
 * class Ledger {
 *   \@Locked('ledger:{args.0}')
 *   async post(accountId: string, cents: number) { ... }
 *
 *   \@Cron(CronExpression.EVERY_MINUTE)
 *   \@Locked('ledger:reconcile', { onBusy: 'skip', minHoldMs: 50_000 })
 *   async reconcile() { ... } // once a minute across every instance
 * }
 */
export const Locked = createLockedDecorator();
