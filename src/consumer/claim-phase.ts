/**
 * Keeping a delivery's broker timer alive (JetStream `working()`, a Redis Streams entry's idle time) from
 * the moment the delivery starts, before its handler runs: while a redelivery reads the dead letter
 * recorded for it, while the store's claim of its key is made, and, for a decision taken without running
 * the handler (a duplicate's ack, a dead letter for a message without a key, a mismatch, a letter recorded
 * before), until it is carried out. The runner's own keep-alive starts only once the handler starts
 * (process.ts), while the broker's timer runs from the delivery: a store slower than it had the broker
 * redeliver (NATS, after `ack_wait`) or hand to this process's own claim round (Redis Streams, after
 * `minIdle`) a message this process still held, each copy counting toward `maxDeliveries`.
 *
 * The adapter stops it when the handler starts ({@link stoppingAtHandler}; the runner's keep-alive goes on
 * from its last touch, `Delivery.touchedAt`, stopped when the lease is lost), before a retry sets the
 * broker's timer itself (a touch after it would undo the delay), before the ack or dead letter settles
 * the message, and once the delivery settled. Bounded by `storeTimeout` otherwise: each store call before
 * the handler is waited for that long at most, then the delivery is handed back.
 * @module
 */

import { KeepAlive } from './keep-alive.js';
import type { ConsumerHandler, ResolvedConsumerOptions } from './options.js';
import { emitHook } from './settle.js';

/**
 * Start touching `message` (delivered `deliveryCount` times) through `touch`, every `intervalMs`; a touch
 * that fails or is overdue is reported to `onBrokerError` (operation `touch`), as the runner's are.
 * @param touchedAt - When the message's timer was last reset before (`performance.now()`: NATS, by the
 *   queue it waited in for a slot); absent, the delivery's start.
 * @returns The running keep-alive: `stop()` ends it; its `touchedAt` goes to `Delivery.touchedAt`.
 */
export function touchWhileClaiming<M>(
  resolved: ResolvedConsumerOptions<M>,
  message: M,
  deliveryCount: number,
  touch: () => Promise<void> | void,
  intervalMs: number,
  touchedAt?: number,
): KeepAlive {
  return new KeepAlive(
    touch,
    intervalMs,
    (error) =>
      emitHook(resolved.hooks, 'onBrokerError', {
        consumer: resolved.name,
        message,
        // Not extracted yet: the shared runner does it, once this delivery is under way.
        key: undefined,
        deliveryCount,
        operation: 'touch',
        error,
      }),
    undefined,
    touchedAt,
  );
}

/**
 * `handler`, stopping `claiming` as it starts: the runner's keep-alive, started just before from
 * `claiming.touchedAt`, takes over. Returns what it returns, as it returns it (a synchronous handler
 * stays synchronous).
 */
export function stoppingAtHandler<M>(
  claiming: KeepAlive,
  handler: ConsumerHandler<M>,
): ConsumerHandler<M> {
  return (message, context) => {
    claiming.stop();
    return handler(message, context);
  };
}
