/**
 * A bound on reaching a server, for commands that must not hang on one that does not answer.
 * @module
 */
import { StoreUnavailableError } from '../core/errors.js';

/**
 * Wait at most `timeoutMs` for `attempt` (a connection, a first query) to `server` (`Redis at host:port`:
 * never the URL, which may hold a password).
 * @param causeOf the failure to report, from what `attempt` rejected with (a client may report the real
 *   cause elsewhere)
 * @throws StoreUnavailableError `<server> did not answer within <n> ms`, or `cannot connect to <server>:
 *   <cause>` with the cause attached
 */
export async function reachWithin(
  attempt: Promise<unknown>,
  server: string,
  timeoutMs: number,
  causeOf: (error: unknown) => Error = (error) => error as Error,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(
      () => reject(new StoreUnavailableError(`${server} did not answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  try {
    await Promise.race([attempt, timedOut]);
  } catch (error) {
    if (error instanceof StoreUnavailableError) throw error;
    const cause = causeOf(error);
    throw new StoreUnavailableError(`cannot connect to ${server}: ${cause.message}`, { cause });
  } finally {
    clearTimeout(timer);
  }
}
