import type { Type } from '@nestjs/common';
import type { Document, Filter } from 'mongodb';
import { InvalidLockKeyError, InvalidLockOptionsError } from '../errors';
import { DocumentHttpInterceptor } from '../http/document-http.interceptor';
import { LockedInterceptor } from '../interceptors/locked.interceptor';
import { compileLockKeys, type LockKeyContext, parseKeyTemplate } from '../keys/key-template';
import { MESSAGES } from '../mongo-lock.messages';
import { isPlainObject } from '../util/value-kinds';
import { lockedDocParams } from './param.decorators';
import type { LockedOptions } from './locked-metadata';
import { checkOptions, decorateLockedMethod } from './locked.decorator';

/** Options of `@LockedDocument`: `ttlMs`, `timeoutMs`, `renew` and `onBusy` as for `@Locked`. */
export interface LockedDocumentOptions<T extends Document = Document> extends Pick<
  LockedOptions,
  'ttlMs' | 'timeoutMs' | 'renew' | 'onBusy'
> {
  /** Static conditions the document must meet; else `DocumentNotFoundError` (HTTP 404) at once. */
  where?: Filter<T>;
  /** Insert the document with these fields when no document has the id, then lock it. */
  createIfMissing?: Partial<T>;
}

/**
 * The document's id: a key template with one placeholder (`'{params.id}'`, `'acct-{args.0}'`),
 * or a function of the call's context; the collection's `idType` converts the text.
 */
export type DocumentIdSpec = string | ((context: LockKeyContext) => string);

const OPTION_NAMES = new Set(['ttlMs', 'timeoutMs', 'renew', 'onBusy', 'where', 'createIfMissing']);

/** The id a template renders: an id is a value, given without key escaping. */
function compileDocumentId(
  spec: DocumentIdSpec,
  where: string,
): (context: LockKeyContext) => string[] {
  const bad = (problem: string) =>
    new InvalidLockKeyError(`@LockedDocument on ${where}: ${problem}`);
  if (typeof spec === 'function') {
    const resolve = compileLockKeys(spec, where);
    return (context) => {
      const ids = resolve(context);
      if (ids.length !== 1) throw bad('the id function must return one id');
      return ids;
    };
  }
  if (typeof spec !== 'string') throw bad('the id must be a template or a function');
  const { parts } = parseKeyTemplate(spec);
  // Its text is decoded with the rendered values; `{{%}}` is text too.
  if (parts.some((part) => part.kind === 'text' && part.text.includes('%'))) {
    throw bad('the id template must not contain %');
  }
  // Two values could split one _id two ways ('{user.tenant}-{params.id}': tenant 'acme' with
  // id 'x-1' and tenant 'acme-x' with id '1'), so that a caller names another's document.
  const placeholders = parts.filter((part) => part.kind === 'value');
  if (placeholders.length > 1)
    throw new InvalidLockKeyError(MESSAGES.documentIdPlaceholders(where));
  return compileLockKeys(spec, where, false);
}

/** Builds a `@LockedDocument` decorator locked by `interceptor` (see `createLockedDecorator`). */
export function createLockedDocumentDecorator(
  interceptor: Type<LockedInterceptor> = LockedInterceptor,
) {
  return function LockedDocument<T extends Document = Document>(
    name: string,
    id: DocumentIdSpec,
    options: LockedDocumentOptions<T> = {},
  ): MethodDecorator {
    return (target, propertyKey, descriptor) =>
      decorateLockedMethod(
        target,
        propertyKey,
        descriptor,
        [DocumentHttpInterceptor, interceptor],
        (where) => {
          const bad = (option: string, accepted: string): never => {
            throw new InvalidLockOptionsError(
              `@LockedDocument on ${where}: ${option} must be ${accepted}`,
              { option },
            );
          };
          if (typeof name !== 'string' || name.length === 0) bad('name', 'a forFeature() name');
          checkOptions(options, where, OPTION_NAMES, '@LockedDocument');
          const { where: filter, createIfMissing, ...lockOptions } = options;
          if (filter !== undefined && !isPlainObject(filter)) bad('where', 'a filter object');
          if (createIfMissing !== undefined && !isPlainObject(createIfMissing)) {
            bad('createIfMissing', 'an object of fields');
          }
          return {
            resolveKeys: compileDocumentId(id, where),
            metricsLabel: typeof id === 'string' ? `${name}/${id}` : `${name}/${where}`,
            templates: typeof id === 'string' ? [id] : [],
            options: lockOptions,
            document: {
              name,
              where: filter as Record<string, unknown> | undefined,
              createIfMissing: createIfMissing as Record<string, unknown> | undefined,
              handleParams: lockedDocParams(target, propertyKey),
            },
          };
        },
        '@LockedDocument',
      );
  };
}

/**
 * Locks one document of a `MongoLockModule.forFeature()` collection while the method runs (a
 * handler or singleton provider method): the lock lives in the document, taken in one round trip
 * that also reads it; `@LockedDoc()` gives the handle. Released after the method unless it
 * committed. Over HTTP: busy is 423 with `Retry-After`, no such document (or `where` not met) 404,
 * a bad id 400, a version conflict 409 (412 when the version came from `@IfMatch()`).
 * @example
 * \@Post(':id/withdraw')
 * \@LockedDocument('accounts', '{params.id}', { timeoutMs: 0 })
 * withdraw(@Body() body: { amount: number }, @LockedDoc() lock: DocumentLockHandle<Account>) {
 *   return lock.commit({ $inc: { balance: -body.amount } });
 * }
 */
export const LockedDocument = createLockedDocumentDecorator();
