/**
 * `idempotency-kit/redis-streams`: an idempotent Redis Streams consumer-group reader over node-redis or
 * ioredis (peer dependencies; pass a client you connected).
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
  RedisStreamsConsumerErrorEvent,
  RedisStreamsConsumerHooks,
  RedisStreamsConsumerOptions,
} from './consumer-options.js';
export { MIN_IDLE_FLOOR_MS } from './consumer-options.js';
export { DELETED_REASON, EntryDeletedError } from './deleted-entries.js';
export type { CommandArgument, RedisStreamsClient, StreamEntry } from './redis-client.js';
export type { RedisStreamsConsumer } from './redis-streams-consumer.js';
export { idempotentConsumer } from './redis-streams-consumer.js';
export { defaultStreamKey, KEY_FIELD } from './stream-key.js';
