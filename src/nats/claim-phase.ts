/**
 * Sending `working()` from the moment a delivery starts, before its handler runs: while a redelivery reads
 * the dead letter recorded for it, while the store's claim of its key is made, and, for a decision taken
 * without running the handler (a duplicate's ack, a dead letter for a message without a key, a mismatch,
 * a letter recorded before), until it is carried out. The shared keep-alive starts only once the handler
 * starts (consumer/process.ts), and JetStream's `ack_wait` runs from the delivery: a store slower than
 * `ack_wait` had the server redeliver the message this process still held. Each such redelivery counted
 * toward `maxDeliveries` (met in progress and `nak()`ed, it used up the deliveries of a failing handler,
 * which was dead-lettered early) or settled the message a second time (a duplicate acked and reported
 * twice, a dead letter written twice, a handler run past `maxDeliveries` once its letter was recorded).
 *
 * Stopped when the handler starts (its own keep-alive goes on from there, stopped when its lease is lost: a
 * hung handler's message is left to the server again), before a `nak()` (a `working()` after it moves the
 * redelivery to `ack_wait` after it, see consumer/settle.ts), before the `ack()` or `term()`, and once the
 * delivery settled. Bounded by `storeTimeout` otherwise: each store call before the handler is waited for
 * that long at most, then the delivery is handed back (`nak()`); a dead letter's publish by `brokerTimeout`.
 * @module
 */

import type { ConsumerHandler, ResolvedConsumerOptions } from '../consumer/index.js';
import { KeepAlive } from '../consumer/keep-alive.js';
import { emitHook } from '../consumer/settle.js';
import type { NatsJsMsg } from './nats-types.js';

/**
 * Start sending `working()` for `message` through `touch`, every `intervalMs`; one that throws (a closed
 * connection) is reported to `onBrokerError` (operation `touch`), as the handler's are. Returns what stops
 * it, idempotent.
 */
export function workingWhileClaiming(
  resolved: ResolvedConsumerOptions<NatsJsMsg>,
  message: NatsJsMsg,
  touch: () => void,
  intervalMs: number,
): () => void {
  const keepAlive = new KeepAlive(touch, intervalMs, (error) =>
    emitHook(resolved.hooks, 'onBrokerError', {
      consumer: resolved.name,
      message,
      // Not extracted yet: the shared runner does it, once this delivery is under way.
      key: undefined,
      deliveryCount: message.info.deliveryCount,
      operation: 'touch',
      error,
    }),
  );
  return () => keepAlive.stop();
}

/**
 * `handler`, calling `stop` as it starts: its own keep-alive takes over from there. Returns what it returns,
 * as it returns it (a synchronous handler stays synchronous).
 */
export function stoppingAtHandler(
  stop: () => void,
  handler: ConsumerHandler<NatsJsMsg>,
): ConsumerHandler<NatsJsMsg> {
  return (message, context) => {
    stop();
    return handler(message, context);
  };
}
