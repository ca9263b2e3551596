import { LockStoreUnavailableError } from './errors/lock-store-unavailable.error';
import { LineAttempt } from './line-attempt';
import type { LineWaiters } from './waiting/line-waiters';

function attemptOnK(): LineAttempt {
  const request = {
    key: 'k',
    kind: { mode: 'exclusive' as const },
    ttlMs: 1_000,
    timeoutMs: 5_000,
  };
  // The waiters are only reached by listening for news, which these tests do not.
  return new LineAttempt(request, performance.now() + 5_000, {} as LineWaiters);
}

async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 5));
}

describe('LineAttempt.unanswered', () => {
  it('names the failure its retries last saw, in the message and as the cause', async () => {
    const attempt = attemptOnK();
    const refused = new LockStoreUnavailableError('MongoDB is unavailable (join): ECONNREFUSED');
    let sent = 0;
    // The first try fails; the retry is never answered, as while the driver selects a server.
    const command = () => (sent++ === 0 ? Promise.reject(refused) : new Promise<never>(() => {}));
    void attempt.retried(command);
    await until(() => sent === 2);
    const error = attempt.unanswered(1_000);
    expect(error).toBeInstanceOf(LockStoreUnavailableError);
    expect(error.cause).toBe(refused);
    expect(error.message).toBe(
      'MongoDB did not answer the acquisition of "k" within 5000 ms and 1000 ms more for its ' +
        'reply; the last try failed: MongoDB is unavailable (join): ECONNREFUSED',
    );
  });

  it('names no failure that a later try saw answered', async () => {
    const attempt = attemptOnK();
    const refused = new LockStoreUnavailableError('MongoDB is unavailable (join): ECONNREFUSED');
    let sent = 0;
    const command = () => (sent++ === 0 ? Promise.reject(refused) : Promise.resolve('placed'));
    await expect(attempt.retried(command)).resolves.toBe('placed');
    // A later command that is never answered: its silence has no known reason.
    void attempt.retried(() => new Promise<never>(() => {}));
    expect(attempt.unanswered(1_000).cause).toBeUndefined();
  });

  it('names no cause when no command failed', () => {
    const error = attemptOnK().unanswered(1_000);
    expect(error.cause).toBeUndefined();
    expect(error.message).not.toMatch(/last try/);
  });
});
