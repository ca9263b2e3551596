/**
 * Decorated methods of a class and its ancestors, by name or symbol (Nest's `MetadataScanner`
 * lists names only), each with the metadata of every level that has it, nearest first: an
 * undecorated override calling `super` runs the ancestor's decorated body. Accessors are skipped.
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
