/**
 * `idempotency-kit/amqp`: an idempotent RabbitMQ consumer over amqplib (a peer dependency; pass a confirm
 * channel you created).
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
export type {
  AmqpConsumer,
  AmqpConsumerErrorEvent,
  AmqpConsumerHooks,
  AmqpConsumerOptions,
} from './amqp-consumer.js';
export { idempotentConsumer } from './amqp-consumer.js';
export type {
  AmqpConfirmChannel,
  AmqpMessage,
  AmqpMessageProperties,
  AmqpPublishOptions,
  AmqpReturnedMessage,
} from './amqp-types.js';
export type { AmqpRetryQueueType } from './declare.js';
export { OMITTED_HEADERS_HEADER } from './header-room.js';
export {
  CONSUMER_HEADER,
  DEAD_LETTER_DELIVERIES_HEADER,
  DEAD_LETTER_REASON_HEADER,
  DELIVERIES_HEADER,
  DELIVERY_ID_HEADER,
  defaultAmqpKey,
  deliveryCount,
  ERROR_HEADER,
  FAILED_AT_HEADER,
  KEY_HEADER,
  USER_ID_HEADER,
} from './headers.js';
export { PENDING_DEAD_LETTER_HEADER } from './pending-letter.js';
export { MAX_PREFETCH } from './queues.js';
export { COPY_ID_HEADER, UnroutableCopyError } from './returns.js';
export { EXCHANGE_HEADER, ROUTING_KEY_HEADER } from './routing.js';
