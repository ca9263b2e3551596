// A spec test that waits forever (a change event that never comes, a hung server) must fail, not
// stall the run: after the deadline the test's clients are closed and it is reported as timed out.

/** How long one spec test may take. */
export const SPEC_TEST_DEADLINE_MS = 20_000;

export async function withDeadline<T>(
  work: Promise<T>,
  onTimeout: () => Promise<unknown>,
  ms = SPEC_TEST_DEADLINE_MS,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      // Closing the clients ends whatever operation is still waiting on the server.
      void onTimeout().catch(() => undefined);
      reject(new Error(`Timed out after ${ms} ms`));
    }, ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
