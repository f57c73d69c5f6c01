/**
 * The span attribute and event names the OpenTelemetry hooks write, in one place so that docs, tests and
 * dashboards quote the same strings.
 * @module
 */

/** Attributes set on the active span of a run. */
export const IdempotencyAttribute = {
  /** The engine's namespace. */
  Namespace: 'idempotency.namespace',
  /** The storage key: SHA-256 hex of namespace, scope and key. Never the raw client key. */
  KeyHash: 'idempotency.key_hash',
  /** How the run ended: `executed`, `replayed`, `in_progress`, `mismatch`, `failed`, `fail_open`. */
  Outcome: 'idempotency.outcome',
  /** The execution's attempt: 1, or more after takeovers of crashed attempts. */
  Attempt: 'idempotency.attempt',
  /** The execution's fencing token. */
  Token: 'idempotency.token',
  /** For a replay: `cache` (no store call) or `store`. */
  ReplaySource: 'idempotency.replay_source',
  /** For `in_progress`: the remaining lease, in ms (the HTTP `Retry-After`). */
  RetryAfterMs: 'idempotency.retry_after_ms',
  /** For a failed run: whether the error was stored as the key's outcome (else the claim was released). */
  ErrorStored: 'idempotency.error_stored',
  /** On a store-error event: the store operation that failed. */
  Operation: 'idempotency.operation',
  /** On a step event: the step's name (`ctx.step`). */
  StepName: 'idempotency.step.name',
  /** On a step event: true when a crashed attempt's recorded result was returned instead of running it. */
  StepReplayed: 'idempotency.step.replayed',
  /** On a recorded step's event: how long its function ran, in ms. */
  StepDurationMs: 'idempotency.step.duration_ms',
  /** On a replication-short event: the replicas that confirmed the write in time (`-1`: the wait failed). */
  ReplicasAcknowledged: 'idempotency.replicas.acknowledged',
  /** On a replication-short event: the replicas the store waits for. */
  ReplicasRequired: 'idempotency.replicas.required',
} as const;

/** Attributes set on the active span of a delivery by the consumer hooks. */
export const ConsumerAttribute = {
  /** The consumer's name (the scope of its keys). */
  Name: 'idempotency.consumer.name',
  /** What was done with the delivery: `ack`, `retry` or `dead_letter`. */
  Decision: 'idempotency.consumer.decision',
  /** Why: `executed`, `duplicate`, `in_progress`, `store_unavailable`, `handler_error`, `lease_lost`, `mismatch`, `invalid_key`. */
  Reason: 'idempotency.consumer.reason',
  /** Deliveries of the message so far, this one included. */
  DeliveryCount: 'idempotency.consumer.delivery_count',
  /** For a retry: the delay before the redelivery, in ms. */
  RetryDelayMs: 'idempotency.consumer.retry_delay_ms',
  /**
   * On a broker-error event: the broker operation that failed (`ack`, `retry`, `dead_letter`, `process`,
   * `touch`). On a consumer-error span: what failed for the consumer as a whole (`consume`, `fetch`,
   * `read`, `create-group`, `cancelled`, `channel-closed`).
   */
  Operation: 'idempotency.consumer.operation',
} as const;

/** Spans the hooks start themselves, for what happens outside any run or delivery. */
export const IdempotencySpan = {
  /**
   * A consumer as a whole hit an error (`onConsumerError`): its JetStream consumer or stream deleted, its
   * NATS connection or RabbitMQ channel closed, a Redis Streams read failed or its group was gone. A root
   * span with status `ERROR`, `idempotency.consumer.name`, `idempotency.consumer.operation` and an
   * `exception` event.
   */
  ConsumerError: 'idempotency.consumer_error',
} as const;

/** Events added to the active span when something unusual happens during a run. */
export const IdempotencyEvent = {
  /** This run took over an attempt whose lease had expired. */
  Takeover: 'idempotency.takeover',
  /** This execution lost its lease, or gave it up past `maxExecution` (see the engine's `onLeaseLost`). */
  LeaseLost: 'idempotency.lease_lost',
  /** A step ran and was recorded, or a crashed attempt's recorded result was returned (`ctx.step`). */
  Step: 'idempotency.step',
  /** A store call failed (also when a retry of it succeeded later). */
  StoreError: 'idempotency.store_error',
  /**
   * A write made after the handler ran was applied but confirmed by fewer replicas than required (the
   * Redis store's `waitForReplicas`; see the engine's `onReplicationShort`).
   */
  ReplicationShort: 'idempotency.replication_short',
  /** A consumer dead-lettered the delivery, with the error it recorded. */
  DeadLetter: 'idempotency.dead_letter',
  /** A consumer's broker operation (ack, redelivery, dead-letter publish) failed. */
  BrokerError: 'idempotency.broker_error',
} as const;
