import { Long, MongoServerError, type Collection, type Db } from 'mongodb';

/**
 * The "fenced resource" pattern, as users of the library should protect what a lock guards:
 * the resource remembers the highest fence that ever wrote to it and accepts a write only if
 * its fence is at least that high. A holder that lost its lease (paused, partitioned, slow)
 * carries an older fence than whoever took over, so its late write is refused by the resource
 * itself, whatever the holder believes.
 */
export interface FencedDocument {
  _id: string;
  /** Highest fence that wrote here. */
  fence: Long;
  value: string;
  writer: string;
  /** Every accepted write, oldest first, so a test can see that nothing was overwritten. */
  history: { fence: Long; value: string; writer: string }[];
}

export class FencedResource {
  private readonly collection: Collection<FencedDocument>;

  constructor(db: Db, collectionName = 'fenced_resources') {
    this.collection = db.collection<FencedDocument>(collectionName);
  }

  /** Writes `value` if `fence` is not below the highest fence seen; says whether it was accepted. */
  async write(id: string, fence: bigint, value: string, writer: string): Promise<boolean> {
    const fenceLong = Long.fromBigInt(fence);
    try {
      // One atomic conditional write: the filter matches only if no higher fence has written.
      // If the document exists with a higher fence, the upsert's insert collides on _id.
      await this.collection.updateOne(
        { _id: id, fence: { $lte: fenceLong } },
        {
          $set: { fence: fenceLong, value, writer },
          $push: { history: { fence: fenceLong, value, writer } },
        },
        { upsert: true, writeConcern: { w: 'majority' } },
      );
      return true;
    } catch (error) {
      if (error instanceof MongoServerError && error.code === 11000) return false;
      throw error;
    }
  }

  async read(id: string): Promise<FencedDocument | null> {
    return this.collection.findOne({ _id: id });
  }
}
