/**
 * The decorated methods of a class and of the classes it extends, by name or by symbol (Nest's
 * `MetadataScanner` lists names only): for each, the metadata of every level that has it,
 * nearest first. An override without the decorator that calls `super` runs an ancestor's
 * decorated body, so the ancestor's metadata counts. Accessors are not read.
 */
export function decoratedMethods<T>(
  prototype: object,
  metadataOf: (method: unknown) => T | undefined,
): Map<PropertyKey, T[]> {
  const found = new Map<PropertyKey, T[]>();
  for (
    let level: object | null = prototype;
    level !== null && level !== Object.prototype;
    level = Object.getPrototypeOf(level) as object | null
  ) {
    for (const key of Reflect.ownKeys(level)) {
      const value: unknown = Object.getOwnPropertyDescriptor(level, key)?.value;
      const metadata = typeof value === 'function' ? metadataOf(value) : undefined;
      if (metadata !== undefined) found.set(key, [...(found.get(key) ?? []), metadata]);
    }
  }
  return found;
}
