/** A shape as `ShapeCache` takes it: structural tokens and their hash. */
export interface ShapeTokens {
  readonly tokens: ReadonlyArray<number | string>;
  readonly hash: number;
}

interface ShapeEntry<V> {
  tokens: ReadonlyArray<number | string>;
  value: V;
  lastUsed: number;
}

function sameTokens(a: ReadonlyArray<number | string>, b: ReadonlyArray<number | string>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * A least-recently-used cache of compiled forms keyed by the shape they were compiled from (a
 * token sequence): found by its hash, then compared token by token, so a hash collision never
 * returns another shape's value, and a hit allocates nothing. At most `capacity` entries; the
 * least recently used one is looked for only when an insert goes over capacity (a miss, which
 * also compiles). Sequences longer than `maxTokens` are compiled but never stored, so memory
 * stays bounded by `capacity × maxTokens` tokens plus the compiled closures.
 */
export class ShapeCache<V> {
  private readonly buckets = new Map<number, Array<ShapeEntry<V>>>();
  private count = 0;
  private clock = 0;
  hits = 0;
  misses = 0;

  constructor(
    readonly capacity: number,
    readonly maxTokens = 8_192,
  ) {}

  get size(): number {
    return this.count;
  }

  getOrCreate(shape: ShapeTokens, create: () => V): V {
    const bucket = this.buckets.get(shape.hash);
    if (bucket) {
      for (const entry of bucket) {
        if (sameTokens(entry.tokens, shape.tokens)) {
          this.hits += 1;
          entry.lastUsed = ++this.clock;
          return entry.value;
        }
      }
    }
    this.misses += 1;
    const value = create();
    if (shape.tokens.length <= this.maxTokens) {
      if (this.count >= this.capacity) this.evictLeastRecentlyUsed();
      const entry: ShapeEntry<V> = { tokens: shape.tokens.slice(), value, lastUsed: ++this.clock };
      const target = this.buckets.get(shape.hash);
      if (target) target.push(entry);
      else this.buckets.set(shape.hash, [entry]);
      this.count += 1;
    }
    return value;
  }

  has(shape: ShapeTokens): boolean {
    return !!this.buckets.get(shape.hash)?.some((entry) => sameTokens(entry.tokens, shape.tokens));
  }

  clear(): void {
    this.buckets.clear();
    this.count = 0;
    this.hits = 0;
    this.misses = 0;
  }

  private evictLeastRecentlyUsed(): void {
    let oldestHash: number | undefined;
    let oldestEntry: ShapeEntry<V> | undefined;
    for (const [hash, bucket] of this.buckets) {
      for (const entry of bucket) {
        if (!oldestEntry || entry.lastUsed < oldestEntry.lastUsed) {
          oldestEntry = entry;
          oldestHash = hash;
        }
      }
    }
    if (oldestHash === undefined || !oldestEntry) return;
    const bucket = this.buckets.get(oldestHash)!;
    bucket.splice(bucket.indexOf(oldestEntry), 1);
    if (bucket.length === 0) this.buckets.delete(oldestHash);
    this.count -= 1;
  }
}
