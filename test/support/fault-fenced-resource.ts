import { Long, type Collection, type Db } from 'mongodb';

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
    if (await this.writeIfNotStale(id, fence, value, writer)) return true;
    // Refused, or the resource does not exist yet: create it empty (creators racing here
    // collide harmlessly) and ask once more; a stale fence is refused again.
    await this.collection.updateOne(
      { _id: id },
      { $setOnInsert: { fence: Long.fromNumber(-1), value: '', writer: '', history: [] } },
      { upsert: true, writeConcern: { w: 'majority' } },
    );
    return this.writeIfNotStale(id, fence, value, writer);
  }

  /** One atomic conditional write: it matches only if no higher fence has written. */
  private async writeIfNotStale(
    id: string,
    fence: bigint,
    value: string,
    writer: string,
  ): Promise<boolean> {
    const fenceLong = Long.fromBigInt(fence);
    const result = await this.collection.updateOne(
      { _id: id, fence: { $lte: fenceLong } },
      {
        $set: { fence: fenceLong, value, writer },
        $push: { history: { fence: fenceLong, value, writer } },
      },
      { writeConcern: { w: 'majority' } },
    );
    return result.matchedCount === 1;
  }

  async read(id: string): Promise<FencedDocument | null> {
    return this.collection.findOne({ _id: id });
  }
}
