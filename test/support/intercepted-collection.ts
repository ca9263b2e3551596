import type { Collection, Db, Document, MongoClient } from 'mongodb';

// A test plays the network or another writer between the library and the server: a collection
// (or every collection of a client) whose `findOneAndUpdate` calls go through the test's `call`,
// which may delay, drop, fail or precede them. The commands still run on the server as sent.

/** Anything with `findOneAndUpdate`: a collection of any schema. */
interface Updating {
  findOneAndUpdate(...args: never[]): unknown;
}

/** A `findOneAndUpdate` call's arguments, as the driver's last overload types them. */
export type FindOneAndUpdateArgs<C extends Updating = Collection<Document>> = Parameters<
  C['findOneAndUpdate']
>;

/** Makes a `findOneAndUpdate` call: `target` is the real collection. */
export type InterceptedCall<C extends Updating> = (
  target: C,
  args: FindOneAndUpdateArgs<C>,
) => Promise<unknown>;

/** `collection`, its `findOneAndUpdate` calls made by `call`. */
export function interceptedCollection<C extends Updating>(
  collection: C,
  call: InterceptedCall<C>,
): C {
  return new Proxy(collection, {
    get(target, property, receiver) {
      if (property !== 'findOneAndUpdate')
        return Reflect.get(target, property, receiver) as unknown;
      return (...args: FindOneAndUpdateArgs<C>) => call(target, args);
    },
  });
}

/** `client`, every collection it opens intercepted by `call` (for a `LockService`'s client). */
export function interceptedClient(
  client: MongoClient,
  call: InterceptedCall<Collection<Document>>,
): MongoClient {
  const bound = <T extends object>(target: T, property: string | symbol): unknown => {
    const value = Reflect.get(target, property, target) as unknown;
    return typeof value === 'function'
      ? (value as (...args: unknown[]) => unknown).bind(target)
      : value;
  };
  const db = (target: Db) =>
    new Proxy(target, {
      get: (t, property) =>
        property === 'collection'
          ? (...args: Parameters<Db['collection']>) =>
              interceptedCollection(t.collection(...args), call)
          : bound(t, property),
    });
  return new Proxy(client, {
    get: (t, property) =>
      property === 'db'
        ? (...args: Parameters<MongoClient['db']>) => db(t.db(...args))
        : bound(t, property),
  });
}

/** The pipeline and token (`let.t`, unwrapped from `$literal`) of a `findOneAndUpdate` call. */
export function commandOf(args: readonly unknown[]): {
  pipeline: unknown;
  token: string | undefined;
} {
  const [, pipeline, options] = args as [unknown, unknown, { let?: { t?: unknown } } | undefined];
  const t = options?.let?.t;
  const token = typeof t === 'object' && t !== null ? (t as { $literal: string }).$literal : t;
  return { pipeline, token: token as string | undefined };
}
