/**
 * A redelivery the server would never make: on the last delivery a JetStream consumer's finite
 * `max_deliver` allows, a `nak()` drops the message (only an advisory says so). Before, every retry asked
 * for there was sent all the same and reported (`MaxDeliverReachedError`): a copy whose key was in
 * progress elsewhere on each of its deliveries (behind a long holder, or a crashed one until its lease
 * ran out), a store outage, a dead letter whose write failed (a full DLQ stream, say), each dropped a
 * message that had not run, or whose letter was never written. Now such a delivery is held here instead,
 * kept alive with `working()` for the retry's delay, then processed again in the same slot, for as long
 * as it takes; only `close()` ends the hold, and then the message is given back (and so dropped, and
 * reported) as before.
 * @module
 */
import { KeepAlive } from '../consumer/keep-alive.js';

/**
 * Keep a delivery alive with `touch` every `intervalMs` (from `touchedAt`, the last touch before) for
 * `delayMs`, or until `signal` aborts (the consumer's `close()`).
 * @returns When the hold last touched the message (`performance.now()`), for the keep-alive that takes
 *   over; `undefined` when aborted.
 */
export function holdFor(
  touch: () => void,
  intervalMs: number,
  onTouchError: (error: unknown) => void,
  delayMs: number,
  signal: AbortSignal,
  touchedAt?: number,
): Promise<number | undefined> {
  if (signal.aborted) return Promise.resolve(undefined);
  const keepAlive = new KeepAlive(touch, intervalMs, onTouchError, undefined, touchedAt);
  return new Promise((resolve) => {
    const end = (aborted: boolean) => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      keepAlive.stop();
      resolve(aborted ? undefined : keepAlive.touchedAt);
    };
    const onAbort = () => end(true);
    const timer = setTimeout(() => end(false), delayMs);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
