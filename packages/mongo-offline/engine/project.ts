import type { Document } from 'bson';
import { Query } from 'mingo/query';
import type { Options } from 'mingo/types';
import { badValue } from '../commands/errors';
import { idFirst } from './apply-update';
import { prepareProjection } from './compiled-projection';
import { bindSystemVariables } from './system-variables';

/**
 * find-style projection (inclusion, exclusion, $slice, $elemMatch, aggregation expressions)
 * via mingo; `_id` is moved back to the front where mingo appends it.
 */
export function projectDocuments(
  documents: Document[],
  projection: Document | undefined,
  options: Partial<Options>,
): Document[] {
  if (!projection || Object.keys(projection).length === 0) return documents;
  try {
    // Top-level projections with compilable expressions run compiled (compiled-projection.ts).
    const compiled = prepareProjection(projection, options);
    if (compiled) {
      return documents.map((document) =>
        inDocumentOrder(document, compiled.apply(document), projection),
      );
    }
    return new Query({}, options)
      .find<Document>(documents, bindSystemVariables(projection, options.variables ?? {}) as never)
      .all()
      .map((projected, i) => inDocumentOrder(documents[i], projected, projection));
  } catch (error) {
    throw badValue(error instanceof Error ? error.message : String(error));
  }
}

/**
 * MongoDB keeps the input document's field order for kept fields and appends computed ones in
 * projection order; mingo orders them its own way.
 */
function inDocumentOrder(source: Document, projected: Document, projection: Document): Document {
  const ordered: Document = {};
  for (const key of Object.keys(source)) if (key in projected) ordered[key] = projected[key];
  for (const path of Object.keys(projection)) {
    const key = path.split('.')[0];
    if (key in projected && !(key in ordered)) ordered[key] = projected[key];
  }
  for (const key of Object.keys(projected)) if (!(key in ordered)) ordered[key] = projected[key];
  return idFirst(ordered);
}

export function projectOne(
  document: Document | null,
  projection: Document | undefined,
  options: Partial<Options>,
): Document | null {
  if (!document) return null;
  return projectDocuments([document], projection, options)[0] ?? null;
}
