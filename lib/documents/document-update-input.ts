import type { Document } from 'mongodb';
import type { DocumentUpdate } from '../store/documents/document-writes';
import { isPlainObject } from '../util/value-kinds';
import { bad } from './document-input';
import type { ResolvedDocumentLocksOptions } from './document-input';

const UPDATE_OPERATORS = new Set(
  '$set $unset $inc $mul $min $max $rename $currentDate $push $pull $addToSet $pop $pullAll $bit'.split(
    ' ',
  ),
);
const PIPELINE_STAGES = new Set(['$set', '$addFields', '$unset']);

/**
 * An update document of field operators, or a pipeline of `$set`/`$addFields`/`$unset` stages,
 * not touching `_id`, the lock or the version (the library writes those). A replacement would
 * wipe the lock: refused.
 */
export function resolveDocumentUpdate(
  update: unknown,
  settings: ResolvedDocumentLocksOptions,
  optional: boolean,
): DocumentUpdate | undefined {
  if (update === undefined && optional) return undefined;
  const reserved = (path: string) => {
    const root = path.split('.')[0];
    return (
      root === '_id' ||
      root === settings.lockField ||
      (settings.version !== undefined &&
        (path === settings.version.field ||
          path.startsWith(`${settings.version.field}.`) ||
          settings.version.field.startsWith(`${path}.`)))
    );
  };
  const checkPaths = (paths: string[], inPipeline = false) => {
    // The server refuses these only after the lock was taken: name the field now.
    const empty = paths.find((path) => path.split('.').includes(''));
    if (empty !== undefined) {
      bad('update', `must not name the field ${JSON.stringify(empty)}: it has an empty part`);
    }
    // `$[]` is the one positional form usable without a query or arrayFilters (never passed);
    // a pipeline takes field names only.
    const dollar = paths.find((path) =>
      path.split('.').some((part) => part.startsWith('$') && (inPipeline || part !== '$[]')),
    );
    if (dollar !== undefined)
      bad(
        'update',
        `must not name the field ${JSON.stringify(dollar)}: field names in an update may not start with $`,
      );
    const touched = paths.find(reserved);
    if (touched)
      bad(
        'update',
        `must not write ${JSON.stringify(touched)}: the library writes _id, the lock and the version`,
      );
  };
  if (Array.isArray(update)) {
    for (const stage of update as unknown[]) {
      const names = isPlainObject(stage) ? Object.keys(stage) : [];
      if (names.length !== 1 || !PIPELINE_STAGES.has(names[0])) {
        bad('update', 'pipelines may only have $set, $addFields and $unset stages');
      }
      const body = (stage as Record<string, unknown>)[names[0]];
      const unsetPaths = typeof body === 'string' ? [body] : Array.isArray(body) ? body : undefined;
      const paths =
        names[0] === '$unset' && unsetPaths?.every((path) => typeof path === 'string')
          ? unsetPaths
          : isPlainObject(body)
            ? Object.keys(body)
            : undefined;
      // A Map or a class instance would be serialised with fields we cannot see here.
      if (!paths) bad('update', `a ${names[0]} stage needs a plain object of fields`);
      if (paths.length === 0) bad('update', `a ${names[0]} stage needs at least one field`);
      checkPaths(paths, true);
    }
    return update as Document[];
  }
  if (!isPlainObject(update)) bad('update', 'must be an update document or a pipeline');
  for (const [operator, fields] of Object.entries(update)) {
    if (!UPDATE_OPERATORS.has(operator)) {
      bad(
        'update',
        operator.startsWith('$')
          ? `must not have ${JSON.stringify(operator)}: it is not an update operator`
          : `must use update operators ($set, $inc, …), got ${JSON.stringify(operator)}: a replacement would wipe the lock`,
      );
    }
    if (!isPlainObject(fields)) bad('update', `${operator} must be an object of fields`);
    checkPaths(Object.keys(fields));
    if (operator === '$rename') checkPaths(Object.values(fields).map(String));
  }
  return update;
}
