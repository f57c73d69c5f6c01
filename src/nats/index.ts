/**
 * `idempotency-kit/nats`: an idempotent NATS JetStream consumer over `@nats-io/jetstream` v3 (a peer
 * dependency; pass a pull consumer you got from `js.consumers.get()`).
 * @module
 */
export type {
  BackoffOptions,
  ConsumerContext,
  ConsumerErrorEvent,
  ConsumerEvent,
  ConsumerHandler,
  ConsumerHooks,
  DeadLetter,
  IdempotencyContext,
  KeyExtractor,
} from '../consumer/index.js';
export { currentIdempotency, DeadLetterReason, RetryReason } from '../consumer/index.js';
export {
  COMPACT_HEADER_VALUE_BYTES,
  ENCODED_HEADERS,
  MAX_HEADER_VALUE_BYTES,
  OMITTED_HEADERS,
  TRUNCATED_HEADERS,
} from './dead-letter.js';
export type {
  NatsConsumer,
  NatsConsumerErrorEvent,
  NatsConsumerHooks,
  NatsConsumerOptions,
} from './nats-consumer.js';
export { defaultNatsKey, idempotentConsumer, KEY_HEADER, MSG_ID_HEADER } from './nats-consumer.js';
export type {
  NatsConsumerMessages,
  NatsHeaders,
  NatsJsMsg,
  NatsPublisher,
  NatsPullConsumer,
} from './nats-types.js';
