import type { Document } from 'bson';
import { CommandError } from '../commands/errors';
import { duplicateKeyMessage } from './index-keys';

/** E11000 with the keyPattern/keyValue fields MongoDB attaches. */
export class DuplicateKeyError extends CommandError {
  constructor(ns: string, indexName: string, keyPattern: Document, keyValue: Document) {
    super(11000, duplicateKeyMessage(ns, indexName, keyValue), { keyPattern, keyValue });
  }

  get keyPattern(): Document {
    return this.extra.keyPattern as Document;
  }

  get keyValue(): Document {
    return this.extra.keyValue as Document;
  }
}
