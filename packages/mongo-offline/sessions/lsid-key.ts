import type { Document } from 'bson';
import { canonicalKey } from '../engine/bson-values';

/** A session's identity as a map key (`lsid.id` is a UUID Binary). */
export function lsidKey(lsid: Document | undefined): string | undefined {
  if (!lsid || typeof lsid !== 'object') return undefined;
  return canonicalKey(lsid.id);
}
