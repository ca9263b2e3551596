import type { Document } from 'bson';
import { CommandError } from './errors';

/** MongoDB's aggregation stage names; anything else is error 40324 as on the server. */
const KNOWN_STAGES = new Set([
  '$addFields',
  '$bucket',
  '$bucketAuto',
  '$changeStream',
  '$changeStreamSplitLargeEvent',
  '$collStats',
  '$count',
  '$currentOp',
  '$densify',
  '$documents',
  '$facet',
  '$fill',
  '$geoNear',
  '$graphLookup',
  '$group',
  '$indexStats',
  '$limit',
  '$listLocalSessions',
  '$listSampledQueries',
  '$listSearchIndexes',
  '$listSessions',
  '$lookup',
  '$match',
  '$merge',
  '$out',
  '$planCacheStats',
  '$project',
  '$redact',
  '$replaceRoot',
  '$replaceWith',
  '$sample',
  '$search',
  '$searchMeta',
  '$set',
  '$setWindowFields',
  '$shardedDataDistribution',
  '$skip',
  '$sort',
  '$sortByCount',
  '$unionWith',
  '$unset',
  '$unwind',
  '$vectorSearch',
]);

/** Stages a change stream pipeline may contain after `$changeStream`. */
export const CHANGE_STREAM_STAGES = new Set([
  '$addFields',
  '$match',
  '$project',
  '$replaceRoot',
  '$replaceWith',
  '$redact',
  '$set',
  '$unset',
  '$changeStreamSplitLargeEvent',
]);

export function stageName(stage: Document): string {
  const keys = Object.keys(stage ?? {});
  if (keys.length !== 1) {
    throw new CommandError(
      40323,
      'A pipeline stage specification object must contain exactly one field.',
    );
  }
  return keys[0];
}

export function validatePipeline(stages: Document[]): void {
  stages.forEach((stage, index) => {
    const name = stageName(stage);
    if (!KNOWN_STAGES.has(name))
      throw new CommandError(40324, `Unrecognized pipeline stage name: '${name}'`);
    if (name === '$changeStream' && index > 0) {
      throw new CommandError(40602, '$changeStream is only valid as the first stage in a pipeline');
    }
    if ((name === '$out' || name === '$merge') && index !== stages.length - 1) {
      throw new CommandError(40601, `${name} can only be the final stage in the pipeline`);
    }
  });
}
