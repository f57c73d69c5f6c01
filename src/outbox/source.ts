/**
 * The `OutboxSource` contract: what a relay needs from the database holding the outbox table. The
 * PostgreSQL and SQLite sources implement it; a test or another database can too.
 * @module
 */
import type { OutboxMessage } from './message.js';

/** Backlog figures, for dashboards and alerts. */
export interface OutboxStats {
  /** Rows not yet confirmed by the broker (never deleted). */
  unsent: number;
  /** Unsent rows whose last publish failed. */
  failing: number;
  /** Sent rows not yet purged. */
  sent: number;
  /** Highest attempt count among unsent rows (0 when none). */
  maxAttempts: number;
  /** Age of the oldest unsent row in ms, or `null` when none: the relay's lag. */
  oldestUnsentAgeMs: number | null;
}

/**
 * A claimed row as a source returns it: the message, or (with `unreadable`) a row whose payload the source
 * could not read back, sent with an empty payload. The relay publishes no such row: it fails it like a
 * refused publish (backoff, `last_error`, `onPublishFailed`), so it is not left out in silence.
 */
export interface ClaimedMessage extends OutboxMessage {
  /** Why the row cannot be published (a PostgreSQL payload over what node-postgres can read back). */
  unreadable?: string;
}

/** What a relay calls on the database. Every method must be safe to call from several relays at once. */
export interface OutboxSource {
  /**
   * Claim up to `limit` unsent rows that are available now and make them unavailable to other relays for
   * `leaseMs` (the lease), counting one attempt each. Never two relays the same row while its lease runs.
   * With `maxBytes` (the relay's `maxBatchBytes`), take a row only while the payloads of the rows before it
   * in this claim total less than `maxBytes`, so the first row always: a claim's result is held in memory
   * whole. A source that ignores it claims by count alone. A row it claims but cannot read comes back
   * with `unreadable` set (see {@link ClaimedMessage}), not left out: the relay reports it.
   */
  claim(limit: number, leaseMs: number, maxBytes?: number): Promise<ClaimedMessage[]>;
  /** Mark these rows sent, by row id. Resolves to the number of rows newly marked. */
  markSent(rowIds: readonly string[]): Promise<number>;
  /**
   * Record a failed publish: keep the row, store `error`, make it claimable again in `retryInMs`. With
   * `attempt` (the claim's `message.attempt`, which the relay passes), only while no claim came since: a
   * relay that records its failure after its lease ran out must not cut short the lease of the relay that
   * took the row over, or a third one would publish the row while that one still is.
   */
  markFailed(rowId: string, retryInMs: number, error: string, attempt?: number): Promise<void>;
  /**
   * Optional: hand claimed rows back unpublished, claimable again at once, each only while no claim came
   * since (`attempt` is the claim's `message.attempt`, as for {@link OutboxSource.markFailed}). A stopping
   * relay calls it for the rows of its batch it had not started: without it they wait for the lease.
   */
  release?(rows: ReadonlyArray<{ rowId: string; attempt: number }>): Promise<void>;
  /** Delete up to `limit` rows sent more than `retentionMs` ago; never an unsent row. Resolves to the count. */
  purgeSent(retentionMs: number, limit: number): Promise<number>;
  /** Backlog figures. */
  stats(): Promise<OutboxStats>;
  /**
   * Optional push notification of new rows (PostgreSQL LISTEN/NOTIFY, in-process signals for SQLite).
   * `wake` is called after a commit that added rows; `onError` reports a broken subscription, which the
   * source re-establishes itself. Resolves to the function that ends the subscription.
   */
  subscribe?(wake: () => void, onError: (error: unknown) => void): Promise<() => Promise<void>>;
}
