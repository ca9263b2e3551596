import type { Collection, Document } from 'mongodb';
import type { LockTestKit } from '../lock-service/lock-test-kit';

/** The user's document these tests lock: an account, with the lock field when held. */
export interface Account extends Document {
  _id: string;
  balance: number;
  _lock?: Document;
}

/** A collection of the suite's with one account, `{ _id: 'a', balance: 100 }`. */
export async function withOneAccount(
  kit: LockTestKit,
): Promise<{ accounts: Collection<Account>; collectionName: string }> {
  const collectionName = `${kit.collectionName}_accounts`;
  const client = await kit.client();
  const accounts = client.db(kit.mongo.dbName).collection<Account>(collectionName);
  await accounts.insertOne({ _id: 'a', balance: 100 });
  return { accounts, collectionName };
}
