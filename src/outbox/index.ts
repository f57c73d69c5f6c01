/**
 * `idempotency-kit/outbox`: the transactional outbox. `enqueue` adds a message inside the business
 * transaction; a relay publishes it after the commit with a stable message id, and the idempotent consumer on
 * the other side deduplicates the re-sends a crash can cause.
 *
 * - Sources: {@link postgresOutboxSource} (SKIP LOCKED + lease, LISTEN/NOTIFY) and {@link sqliteOutboxSource}.
 * - Publishers: {@link amqpPublisher} (confirm channel), {@link natsPublisher} (JetStream, `Nats-Msg-Id`),
 *   {@link redisStreamsPublisher} (XADD) and {@link createInProcessBus} (the embedded default).
 * @module
 */

export {
  AMQP_KEY_HEADER,
  type AmqpChannelSource,
  type AmqpConfirmChannelLike,
  type AmqpPublisherOptions,
  amqpPublisher,
} from './amqp-publisher.js';
export { type Backoff, type BackoffOptions, exponentialBackoff } from './backoff.js';
export type {
  PgPool,
  PgPoolClient,
  PgQueryable,
  PgResult,
  SqliteDatabaseLike,
  SqliteStatementLike,
  SqliteTransactionLike,
} from './clients.js';
export {
  type EnqueueOptions,
  enqueue,
  migrateOutbox,
  type OutboxTableOptions,
} from './enqueue.js';
export {
  type BusHandler,
  createInProcessBus,
  type InProcessBus,
  type InProcessBusOptions,
} from './in-process-bus.js';
export {
  ContentType,
  decodePayload,
  type EnqueueMessage,
  type EnqueueResult,
  type OutboxMessage,
} from './message.js';
export { DEFAULT_OUTBOX_SCHEMA, DEFAULT_OUTBOX_TABLE } from './names.js';
export {
  type JetStreamClientLike,
  NATS_KEY_HEADER,
  type NatsHeadersLike,
  type NatsPubAckLike,
  type NatsPublisherOptions,
  natsPublisher,
} from './nats-publisher.js';
export type { MigrateOutboxResult } from './postgres-outbox.js';
export { type PostgresOutboxSourceOptions, postgresOutboxSource } from './postgres-source.js';
export type { Publisher } from './publisher.js';
export {
  type IoRedisLike,
  type NodeRedisLike,
  RedisStreamField,
  type RedisStreamsPublisherOptions,
  redisStreamsPublisher,
} from './redis-streams-publisher.js';
export {
  createRelay,
  type Relay,
  type RelayOptions,
  type RelayRoundResult,
} from './relay.js';
export type { ClaimedMessage, OutboxSource, OutboxStats } from './source.js';
export { type SqliteOutboxSourceOptions, sqliteOutboxSource } from './sqlite-source.js';
