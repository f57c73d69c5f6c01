/**
 * The bound on every Redis call: a call that gets no answer within `timeoutMs` rejects with
 * `StoreUnavailableError` (fail closed, never a hang), and every failure is wrapped in that error.
 * @module
 */
import { StoreUnavailableError } from '../core/errors.js';

/**
 * Wraps one command in the store's timeout and error mapping; `decode` (when given) turns the reply into
 * the result, and a reply it cannot decode fails the call like a backend error.
 */
export type Guard = <R, T = R>(
  operation: string,
  call: () => Promise<R>,
  decode?: (reply: R) => T,
) => Promise<T>;

/**
 * A guard bounding calls by `timeoutMs`. A call that loses the race keeps a rejection handler, so a late
 * failure is never an unhandled rejection. Hot path: one promise and one timer per call, no async
 * functions in between (each layer costs the client CPU that bounds throughput).
 */
export function createGuard(timeoutMs: number): Guard {
  const fail = (operation: string, error: unknown) => {
    const message = error instanceof Error ? error.message : String(error);
    return new StoreUnavailableError(`Redis store: ${operation} failed: ${message}`, {
      cause: error,
    });
  };
  return <R, T = R>(
    operation: string,
    call: () => Promise<R>,
    decode?: (reply: R) => T,
  ): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(
          new StoreUnavailableError(
            `Redis store: ${operation} got no answer within ${timeoutMs} ms`,
            { retryAfterMs: timeoutMs },
          ),
        );
      }, timeoutMs);
      let pending: Promise<R>;
      try {
        pending = call();
      } catch (error) {
        pending = Promise.reject(error);
      }
      pending.then(
        (reply) => {
          clearTimeout(timer);
          if (decode === undefined) {
            resolve(reply as unknown as T);
            return;
          }
          try {
            resolve(decode(reply));
          } catch (error) {
            reject(fail(operation, error));
          }
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(fail(operation, error));
        },
      );
    });
}
