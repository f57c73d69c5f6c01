/**
 * An idempotent consumer on the in-process bus, with the same rules as the broker consumers
 * (`idempotency-kit/amqp`, `/nats`): the key is the message id, scoped by the consumer's name; a duplicate
 * is acknowledged without running; a message in progress elsewhere, a store outage or a handler error is
 * not acknowledged. On the bus "not acknowledged" means the publish rejects, so the relay keeps the outbox
 * row and publishes it again after its backoff.
 * @module
 */
import type { Idempotency } from '../../src/index.js';
import { decodePayload, type InProcessBus, type OutboxMessage } from '../../src/outbox/index.js';
import type { WorkerContext } from './worker.js';

/** Options of {@link consumeBus}. */
export interface BusConsumerOptions {
  /** The engine holding the consumer's records. */
  engine: Idempotency;
  /** The consumer's name: its keys are scoped `consumer:<name>`, as the broker consumers scope theirs. */
  name: string;
  /** The topic to subscribe to. */
  topic: string;
  /** Called for each duplicate acknowledged without running. @default nothing */
  onDuplicate?: (message: OutboxMessage) => void;
}

/**
 * Subscribe `handler` to the bus, idempotently. Returns the unsubscribe function.
 * @example
 * const stop = consumeBus(bus, (body, ctx) => handle(parseInitiated(body), ctx), {
 *   engine, name: 'payments-worker', topic: 'payment.initiated',
 * });
 */
export function consumeBus(
  bus: InProcessBus,
  handler: (body: unknown, context: WorkerContext) => Promise<void>,
  options: BusConsumerOptions,
): () => void {
  const scope = `consumer:${options.name}`;
  return bus.subscribe(options.topic, async (message) => {
    const outcome = await options.engine.run({ key: message.id, scope }, (context) =>
      handler(decodePayload(message), context),
    );
    switch (outcome.status) {
      case 'executed':
        return;
      case 'replayed':
        options.onDuplicate?.(message);
        return;
      case 'in_progress':
        // Never acknowledge: the holder may have died, and then this delivery must be the one that runs.
        throw new Error(
          `${message.id} is in progress elsewhere; retry in ${outcome.retryAfterMs} ms`,
        );
      case 'mismatch':
        throw new Error(`${message.id} was first consumed with a different fingerprint`);
    }
  });
}
