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
} as const;

/** Events added to the active span when something unusual happens during a run. */
export const IdempotencyEvent = {
  /** This run took over an attempt whose lease had expired. */
  Takeover: 'idempotency.takeover',
  /** This execution lost its lease, or gave it up past `maxExecution` (see the engine's `onLeaseLost`). */
  LeaseLost: 'idempotency.lease_lost',
  /** A store call failed (also when a retry of it succeeded later). */
  StoreError: 'idempotency.store_error',
} as const;
