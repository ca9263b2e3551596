// Builds a client entity's connection string: the suite's URI plus the entity's `uriOptions`.
import type { Topology } from '../server-info';

/**
 * `uriOptions` override options of the same name (case-insensitively) in `baseUri`. With
 * `useMultipleMongoses: false` on a sharded cluster only the first mongos is kept.
 */
export function clientUri(
  baseUri: string,
  uriOptions: Record<string, unknown> = {},
  useMultipleMongoses: boolean | undefined,
  topology: Topology,
): string {
  const match = /^(mongodb(?:\+srv)?:\/\/)([^/?]*)(\/[^?]*)?(?:\?(.*))?$/.exec(baseUri);
  if (!match) throw new Error(`Cannot parse the connection string ${baseUri}`);
  const [, scheme, authority, path = '/', query = ''] = match;
  let hosts = authority;
  if (useMultipleMongoses === false && topology === 'sharded') {
    const at = authority.lastIndexOf('@');
    hosts = authority.slice(0, at + 1) + authority.slice(at + 1).split(',')[0];
  }
  const overridden = new Set(Object.keys(uriOptions).map((key) => key.toLowerCase()));
  const params = query
    .split('&')
    .filter((pair) => pair && !overridden.has(pair.split('=')[0].toLowerCase()));
  for (const [key, value] of Object.entries(uriOptions)) {
    // readPreferenceTags is given as a list: one URI parameter per tag set.
    const values = Array.isArray(value) ? value : [value];
    for (const item of values) params.push(`${key}=${encodeURIComponent(uriValue(item))}`);
  }
  return `${scheme}${hosts}${path}${params.length ? `?${params.join('&')}` : ''}`;
}

function uriValue(value: unknown): string {
  if (value !== null && typeof value === 'object') {
    // authMechanismProperties and the like: KEY:value pairs.
    return Object.entries(value)
      .map(([k, v]) => `${k}:${String(v)}`)
      .join(',');
  }
  return String(value);
}
