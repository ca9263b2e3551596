import type { ChangeStreamDocument, Document } from 'mongodb';
import type { LineWatch } from '../line/line-events';
import { reopeningStream } from '../line/line-events';
import type { DocumentLineFields } from './document-line';
import type { DocumentLineStore } from './document-line-store';

export type DocumentChange = Extract<
  ChangeStreamDocument<Document>,
  { operationType: 'update' | 'replace' | 'delete' }
> & { wallTime?: Date };

/**
 * Updates that set or remove the lead (matching `leads` if given) or drop the lock field or its
 * line; replacements; deletions. A changed lead shows as a dotted name (read with `$getField`)
 * or inside the whole lock field, as the server diffed it.
 */
export function changeFilter(fields: DocumentLineFields, leads?: string): Document {
  const lead = fields.path('lead');
  const line = fields.path('line');
  const dotted = { $getField: { field: lead, input: '$updateDescription.updatedFields' } };
  const named = leads
    ? [
        { [`updateDescription.updatedFields.${lead}`]: { $regex: leads } },
        { $expr: { $regexMatch: { input: { $ifNull: [dotted, ''] }, regex: leads } } },
      ]
    : [
        { [`updateDescription.updatedFields.${fields.field}`]: { $exists: true } },
        { $expr: { $ne: [{ $type: dotted }, 'missing'] } },
        { 'updateDescription.removedFields': lead },
      ];
  const updates = [
    // Lock field or line removed, nulled or set without a line: other code, never the library.
    { 'updateDescription.removedFields': { $in: [fields.field, line] } },
    { [`updateDescription.updatedFields.${fields.field}`]: { $type: 'null' } },
    {
      [`updateDescription.updatedFields.${fields.field}`]: { $type: 'object' },
      [`updateDescription.updatedFields.${line}`]: { $exists: false },
    },
    ...named,
  ];
  return {
    $or: [
      { operationType: { $in: ['replace', 'delete'] } },
      ...updates.map((condition) => ({ operationType: 'update', ...condition })),
    ],
  };
}

export function watchChanges(
  { collection, operationTimeoutMs }: DocumentLineStore,
  filter: Document,
  options: { fullDocument?: 'updateLookup' },
  onChange: (event: DocumentChange) => void,
  onFailure: (error: unknown) => void = () => undefined,
  onOpen?: () => void,
): LineWatch {
  return reopeningStream<DocumentChange>(
    (resuming) =>
      collection.watch<Document, DocumentChange>([{ $match: filter }], { ...options, ...resuming }),
    (event) => {
      if (event.documentKey?._id !== undefined) onChange(event);
    },
    onFailure,
    onOpen,
    { answerWithinMs: operationTimeoutMs },
  );
}
