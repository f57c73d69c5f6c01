/**
 * A promise raced with a timer: the one helper behind the consumers' bounded waits, a store call within
 * `storeTimeout` (store-deadline.ts), a broker settle within `brokerTimeout` (broker-deadline.ts), and a
 * drain or a loop's end within `drainTimeout` (in-flight.ts). Not the per-message deadlines of an attempt
 * (process.ts), which arm a timer of their own without a promise.
 * @module
 */

/** What {@link within} resolves to when `call` did not answer in time. */
export const TIMED_OUT: unique symbol = Symbol('timed out');

/**
 * `call`'s answer, or {@link TIMED_OUT} once `ms` passed without one; the timer is cleared either way, and
 * a rejection is passed on.
 * @param unref - Whether the timer may let the process exit: true for a call nobody answers (a hung store
 *   or broker must not keep a process alive by itself), false for a wait the process must see through
 *   (`close()`'s drain: a process must not exit in the middle of it).
 */
export async function within<T>(
  call: Promise<T>,
  ms: number,
  unref: boolean,
): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(resolve, ms, TIMED_OUT);
    if (unref) timer.unref();
  });
  try {
    return await Promise.race([call, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}
