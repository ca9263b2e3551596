import { Observable } from 'rxjs';
import { MongoLockError } from '../errors/mongo-lock.error';
import { MESSAGES } from '../mongo-lock.messages';
import type { LockedMethodReturn } from './locked-metadata';

export type AnyMethod = (this: unknown, ...args: unknown[]) => unknown;

/** What a method decorator of ours put on a method, under which metadata key. */
interface Place {
  where: string;
  decorator: string;
  metadataKey: string | symbol;
  metadata: object;
}

/**
 * Per prototype (or class, for statics), the methods our decorators replaced: every decorator of
 * ours on a property, innermost first (`@Locked` above `@OnlyLeader` leaves both to check).
 */
const places = new WeakMap<object, Map<PropertyKey, Place[]>>();

/** `prototype` and its ancestors up to, not including, `Object.prototype`. */
export function* prototypeChain(prototype: object): Generator<object> {
  for (
    let level: object | null = prototype;
    level !== null && level !== Object.prototype;
    level = Object.getPrototypeOf(level) as object | null
  ) {
    yield level;
  }
}

/** The decorated instance method: its names, or `notAMethod`/`staticMethod` thrown. */
export function decoratedMethod(
  target: object,
  propertyKey: string | symbol,
  descriptor: { value?: unknown } | undefined,
  decorator: string,
  notAMethod: (where: string, decorator: string) => string = MESSAGES.notAMethod,
): { className: string; methodName: string; where: string; method: AnyMethod } {
  // On a static method the target is the class itself.
  const isStatic = typeof target === 'function';
  const className = isStatic ? target.name : target.constructor.name;
  const methodName = String(propertyKey);
  const where = `${className}.${methodName}`;
  const method: unknown = descriptor?.value;
  if (typeof method !== 'function') throw new MongoLockError(notAMethod(where, decorator));
  if (isStatic) throw new MongoLockError(MESSAGES.staticMethod(where, decorator));
  return { className, methodName, where, method: method as AnyMethod };
}

/**
 * Puts `wrapper` in `original`'s place, carrying `place.metadata`, and made to look like
 * `original` to Nest, Swagger and the rest.
 */
export function replaceMethod(
  target: object,
  propertyKey: PropertyKey,
  descriptor: PropertyDescriptor,
  original: AnyMethod,
  wrapper: AnyMethod,
  place: Place,
): void {
  for (const key of Reflect.getOwnMetadataKeys(original)) {
    Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, original), wrapper);
  }
  for (const property of ['name', 'length'] as const) {
    Object.defineProperty(wrapper, property, { value: original[property] });
  }
  // Metadata defined on the original later is still found through the prototype chain.
  Object.setPrototypeOf(wrapper, original);
  Reflect.defineMetadata(place.metadataKey, place.metadata, wrapper);
  descriptor.value = wrapper;
  const known = places.get(target) ?? new Map<PropertyKey, Place[]>();
  places.set(target, known.set(propertyKey, [...(known.get(propertyKey) ?? []), place]));
}

const isType = (type: unknown, expected: { name: string }) =>
  type === expected || (typeof type === 'function' && type.name === expected.name);

/** The method's {@link LockedMethodReturn}: from `async`, else its `design:returntype` metadata. */
export function methodReturn(
  target: object,
  propertyKey: string | symbol,
  method: AnyMethod,
): LockedMethodReturn {
  const type: unknown = Reflect.getMetadata('design:returntype', target, propertyKey);
  if (isType(type, Observable)) return 'observable';
  if (method.constructor.name === 'AsyncFunction' || isType(type, Promise)) return 'promise';
  if (!Reflect.hasOwnMetadata('design:returntype', target, propertyKey)) return 'unknown';
  return 'value';
}

/**
 * The places on `prototype`'s chain where our method no longer stands: a decorator applied after
 * ours (written above it) replaced it without copying its metadata, so Nest and our start-up no
 * longer see it (a route would run without its interceptor: unlocked). An override in a subclass
 * is another place and counts as nothing here.
 */
export function replacedPlaces(prototype: object): Place[] {
  const replaced: Place[] = [];
  for (const level of prototypeChain(prototype)) {
    for (const [key, ours] of places.get(level) ?? []) {
      const method: unknown = Object.getOwnPropertyDescriptor(level, key)?.value;
      for (const place of ours) {
        const metadata: unknown =
          typeof method === 'function' && Reflect.getMetadata(place.metadataKey, method);
        if (metadata !== place.metadata) replaced.push(place);
      }
    }
  }
  return replaced;
}
