/**
 * The `Publisher` contract: how the relay hands a message to a broker.
 * @module
 */
import type { OutboxMessage } from './message.js';

/**
 * Sends one outbox message to a broker. `publish` must resolve **only once the broker has confirmed** the
 * message (a RabbitMQ publisher confirm, a JetStream PubAck, a Redis reply), and reject otherwise: the relay
 * marks the row sent when it resolves and retries it with backoff when it rejects.
 *
 * Every publish of a row carries the same `message.id`; a publisher should put it where the consumer side
 * (and broker-side dedup, where the broker has it) can read it.
 */
export interface Publisher {
  /**
   * Publish `message`; resolve when the broker confirmed it. `options.signal` (passed by the relay) is
   * aborted when the relay stops waiting (the publish was not confirmed within `publishTimeoutMs`): the
   * publish has failed for the relay, whatever comes later, so free what it holds for the confirm.
   * Publishers that hold nothing may ignore it.
   */
  publish(message: OutboxMessage, options?: { signal?: AbortSignal }): Promise<void>;
}
