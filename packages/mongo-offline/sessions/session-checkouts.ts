/**
 * As a mongod checks a session out to one operation at a time: an operation of a session (one
 * sent with a `txnNumber`) waits for the session's operation before it, so that a retry sent
 * while its first try waits for a transaction finds the first try's reply.
 */
export class SessionCheckouts {
  /** Per session, settles once its operations so far have. */
  private readonly inUse = new Map<string, Promise<void>>();

  async run<T>(session: string, operation: () => Promise<T>): Promise<T> {
    const before = this.inUse.get(session) ?? Promise.resolve();
    const result = before.then(operation);
    const settled = result.then(
      () => undefined,
      () => undefined,
    );
    this.inUse.set(session, settled);
    void settled.then(() => {
      if (this.inUse.get(session) === settled) this.inUse.delete(session);
    });
    return result;
  }
}
