/**
 * A JetStream consumer's `backoff` schedule, as the server applies it. With one, the server sets
 * `ack_wait` to `backoff[0]`, but gives delivery `n` the window `backoff[n-1]` (the last entry past the
 * end): after each `working()`, and after a `nak(delay)`, whose pending time it backdates by `ack_wait`
 * only (nats-server `consumer.go`, `processNak` and `checkPending`, the same from 2.9 to 2.14). So:
 *
 * - a `nak(delay)` came back `backoff[n-1] - ack_wait` late: with `backoff` [1 s, 6 s], a retry after 300 ms
 *   on the second delivery came after 5.3 s, and a key in progress elsewhere waited as long each time;
 * - an entry shorter than `ack_wait` left `working()`, sent on a third of `ack_wait`, too late for that
 *   delivery: the server redelivered the message while its handler ran, each copy counting toward
 *   `max_deliver`.
 * @module
 */
import type { NatsConsumerConfig } from './nats-types.js';

/** The consumer's `backoff` in milliseconds; empty without one. */
function entriesMs(config: NatsConsumerConfig): number[] {
  return (config.backoff ?? []).map((nanos) => nanos / 1e6);
}

/**
 * The shortest time the server waits for an answer to a delivery (after it, or after a `working()`): the
 * consumer's `ack_wait`, or its shortest `backoff` entry. `undefined` when it has neither.
 */
export function shortestAckWindowMs(config: NatsConsumerConfig): number | undefined {
  const windows = entriesMs(config);
  if (config.ack_wait !== undefined && config.ack_wait > 0) windows.push(config.ack_wait / 1e6);
  const positive = windows.filter((ms) => ms > 0);
  return positive.length === 0 ? undefined : Math.min(...positive);
}

/**
 * The delay to send with `nak()` on delivery `deliveryCount` for the message to come back after
 * `delayMs`: shortened by what the backoff entry of that delivery adds past `ack_wait` (lengthened by
 * what a shorter entry takes off). A delay the server cannot give that short is sent as 1 ms, which
 * brings the message back as soon as it can, and never sooner than asked; no delay stays none (`nak()`
 * at once, which the schedule does not touch).
 */
export function nakDelayFor(
  config: NatsConsumerConfig,
): (deliveryCount: number, delayMs: number) => number {
  const entries = entriesMs(config);
  if (entries.length === 0) return (_deliveryCount, delayMs) => delayMs;
  const ackWaitMs =
    config.ack_wait !== undefined && config.ack_wait > 0
      ? config.ack_wait / 1e6
      : (entries[0] as number);
  return (deliveryCount, delayMs) => {
    if (delayMs <= 0) return delayMs;
    const entry = entries[Math.min(Math.max(deliveryCount - 1, 0), entries.length - 1)] as number;
    return Math.max(delayMs - (entry - ackWaitMs), 1);
  };
}
