import type { Type } from '@nestjs/common';
import type { Document, Filter } from 'mongodb';
import { InvalidLockKeyError, InvalidLockOptionsError } from '../errors';
import { DocumentHttpInterceptor } from '../http/document-http.interceptor';
import { LockedInterceptor } from '../interceptors/locked.interceptor';
import { compileLockKeys, type LockKeyContext, parseKeyTemplate } from '../keys/key-template';
import { MESSAGES } from '../mongo-lock.messages';
import { isPlainObject } from '../util/value-kinds';
import { lockedDocParams } from './document-lock-context';
import type { LockedOptions } from './locked-metadata';
import { checkOptions, decorateLockedMethod } from './locked.decorator';

/**
 * Options of `@LockedDocument`: those of `@Locked` but `minHoldMs`, plus what a document lock
 * takes: a static `where` and `createIfMissing`.
 */
export interface LockedDocumentOptions<T extends Document = Document> extends Pick<
  LockedOptions,
  'ttlMs' | 'timeoutMs' | 'renew' | 'onBusy'
> {
  /** Extra conditions the document must meet; not met = `DocumentNotFoundError` (HTTP 404), at once. */
  where?: Filter<T>;
  /** Insert the document with these fields when no document has the id, then lock it. */
  createIfMissing?: Partial<T>;
}

/**
 * The document's id: a key template with one or more placeholders (`'{params.id}'`,
 * `'{args.0}'`, `'{user.tenant}-{params.id}'`) rendering the id as text, or a function of the
 * call's context returning it. The collection's `idType` converts it (ObjectId, number).
 */
export type DocumentIdSpec = string | ((context: LockKeyContext) => string);

const OPTION_NAMES = new Set(['ttlMs', 'timeoutMs', 'renew', 'onBusy', 'where', 'createIfMissing']);

/**
 * The id a template renders. Templates percent-encode `%`, `:` and the template's punctuation
 * in the values they fill in (so keys stay unambiguous); an id is a value, given back as is.
 */
function compileDocumentId(
  spec: DocumentIdSpec,
  where: string,
): (context: LockKeyContext) => string[] {
  if (typeof spec === 'function') {
    const resolve = compileLockKeys(spec, where);
    return (context) => {
      const ids = resolve(context);
      if (ids.length !== 1) {
        throw new InvalidLockKeyError(
          `@LockedDocument on ${where}: the id function must return one id`,
        );
      }
      return ids;
    };
  }
  if (typeof spec !== 'string') {
    throw new InvalidLockKeyError(
      `@LockedDocument on ${where}: the id must be a template or a function`,
    );
  }
  if (spec.replace(/\{[^}]*\}/g, '').includes('%')) {
    throw new InvalidLockKeyError(
      `@LockedDocument on ${where}: the id template must not contain %`,
    );
  }
  // Two values could split one _id two ways ('{user.tenant}-{params.id}': tenant 'acme' with
  // id 'x-1' and tenant 'acme-x' with id '1'), so that a caller names another's document.
  const placeholders = parseKeyTemplate(spec).parts.filter((part) => part.kind === 'value');
  if (placeholders.length > 1)
    throw new InvalidLockKeyError(MESSAGES.documentIdPlaceholders(where));
  const resolve = compileLockKeys(spec, where);
  return (context) => resolve(context).map((rendered) => decodeURIComponent(rendered));
}

/**
 * Builds a `@LockedDocument` decorator whose handlers are locked by `interceptor`, a subclass
 * of `LockedInterceptor` with your own hooks (see `createLockedDecorator`).
 */
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
          checkOptions(options, where, OPTION_NAMES);
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
      );
  };
}

/**
 * Locks one document of a collection registered with `MongoLockModule.forFeature()` while the
 * method runs: the lock lives in the document, taken in one round trip that also reads it;
 * `@LockedDoc()` gives the handle (`doc`, `update()`, `commit()`). Released after the method,
 * as with `@Locked`, unless the method committed (then nothing more is sent). Works on
 * controller handlers and on singleton provider methods.
 *
 * Over HTTP: busy is 423 with `Retry-After`, no such document (or `where` not met, without
 * `createIfMissing`) is 404, a bad id is 400; version conflicts the handler meets are 409
 * (412 when the expected version came from `@IfMatch()`).
 *
 * @example
 * \@Post(':id/withdraw')
 * \@LockedDocument('accounts', '{params.id}', { timeoutMs: 0 })
 * withdraw(@Body() body: { amount: number }, @LockedDoc() lock: DocumentLockHandle<Account>) {
 *   return lock.commit({ $inc: { balance: -body.amount } });
 * }
 */
export const LockedDocument = createLockedDocumentDecorator();
