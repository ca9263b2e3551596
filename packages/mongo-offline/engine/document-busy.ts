/**
 * Thrown, before it writes anything, by a write outside a transaction to a document that an
 * open transaction has written: MongoDB makes such a write wait until the transaction commits
 * or aborts, then run (`commands/transaction-waits.ts`).
 */
export class DocumentBusy extends Error {
  constructor(readonly transactionEnded: Promise<void>) {
    super('a document of this write is written by an open transaction');
  }
}
