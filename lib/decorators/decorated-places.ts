/** What a method decorator of ours put on a method, and how to read it back. */
interface Place {
  where: string;
  decorator: string;
  metadata: object;
  read: (method: unknown) => object | undefined;
}

/** Per prototype (or class, for statics), the methods our decorators replaced. */
const places = new WeakMap<object, Map<PropertyKey, Place>>();

/** Records that `decorator` replaced `target[key]` with a method carrying `metadata`. */
export function recordDecoratedPlace(target: object, key: PropertyKey, place: Place): void {
  const known = places.get(target) ?? new Map<PropertyKey, Place>();
  places.set(target, known.set(key, place));
}

/**
 * The places on `prototype`'s chain where our method no longer stands: a decorator applied after
 * ours (written above it) replaced it without copying its metadata, so Nest and our start-up no
 * longer see it (a route would run without its interceptor: unlocked). An override in a subclass
 * is another place and counts as nothing here.
 */
export function replacedPlaces(prototype: object): Place[] {
  const replaced: Place[] = [];
  for (
    let level: object | null = prototype;
    level !== null && level !== Object.prototype;
    level = Object.getPrototypeOf(level) as object | null
  ) {
    for (const [key, place] of places.get(level) ?? []) {
      const method: unknown = Object.getOwnPropertyDescriptor(level, key)?.value;
      if (place.read(method) !== place.metadata) replaced.push(place);
    }
  }
  return replaced;
}
