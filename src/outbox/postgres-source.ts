/**
 * The PostgreSQL {@link OutboxSource}: claims with `FOR UPDATE SKIP LOCKED` plus a lease column, marks rows
 * sent by id, purges sent rows past retention, and wakes relays with LISTEN/NOTIFY.
 * @module
 */
import { MAX_TIMER_MS } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import { booleanOption, knownFields, shownValue } from '../core/option-checks.js';
import { checkOutGuarded } from '../postgres/check-out.js';
import {
  isPgPool,
  isPgQueryable,
  type PgPool,
  type PgPoolClient,
  type PgQueryable,
} from './clients.js';
import { outboxStoreError } from './errors.js';
import { parseHeaders } from './message.js';
import { postgresOutboxNames, renderOutboxSql } from './names.js';
import { MAX_POSTGRES_PAYLOAD_BYTES } from './payload-size.js';
import { runStatement } from './postgres-statement.js';
import { byRowId } from './row-ids.js';
import type { ClaimedMessage, OutboxSource, OutboxStats } from './source.js';
import * as sql from './sql.gen.js';

/** Options of {@link postgresOutboxSource}. */
export interface PostgresOutboxSourceOptions {
  /**
   * A node-postgres `Pool` (or anything with `query`). Claims, marks and purges are single statements in
   * autocommit, so no connection is held between them. LISTEN needs a `Pool` to check one connection out.
   * The statements run at the connections' `default_transaction_isolation`; above read committed, those
   * a concurrent relay's commit refused (40001) run again at read committed, in a transaction of their own
   * (docs/outbox.md, "Claiming rows"): give the relays' connections read committed to save the first runs.
   */
  pool: PgQueryable;
  /** Schema of the outbox table. @default 'public' */
  schema?: string;
  /** Name of the outbox table. @default 'idempotency_outbox' */
  table?: string;
  /**
   * Hold one pooled connection in `LISTEN` so a commit wakes the relay at once (the pool then needs
   * `max >= 2`: claims use the others). With `false` the relay only polls (every `pollIntervalMs`).
   * @default true
   */
  listen?: boolean;
  /** Wait before re-establishing a broken LISTEN connection. @default 1000 */
  reconnectDelayMs?: number;
}

interface ClaimedRow {
  row_id: string;
  message_id: string;
  topic: string;
  message_key: string | null;
  /** `null` when over what node-postgres can read (see postgres-claim.sql). */
  payload: Buffer | null;
  content_type: string;
  headers: unknown;
  attempts: number;
  created_at: Date | string;
  /** Why `payload` is `null`: the reason the claim wrote to `last_error`. */
  unreadable: string | null;
}

// Every key of PostgresOutboxSourceOptions, checked by the compiler both ways: a misspelt `tabel` would read
// the default table while `enqueue` writes another, and no message would ever be published.
const SOURCE_FIELDS = Object.keys({
  pool: true,
  schema: true,
  table: true,
  listen: true,
  reconnectDelayMs: true,
} as const satisfies Record<keyof PostgresOutboxSourceOptions, true>);

/**
 * The outbox table in PostgreSQL as a relay's source.
 *
 * Claiming: one statement locks up to `limit` unsent rows with `FOR UPDATE SKIP LOCKED` and pushes their
 * `available_at` forward by the lease, then commits. The publish happens outside any transaction, so a slow
 * broker holds no locks or connections; other relays skip the rows until the lease ends, and take them over
 * if this relay dies.
 * @example
 * const source = postgresOutboxSource({ pool, schema: 'billing' });
 * const relay = createRelay({ source, publisher: amqpPublisher({ channel }) });
 * relay.start();
 */
export function postgresOutboxSource(options: PostgresOutboxSourceOptions): OutboxSource {
  if (options === null || typeof options !== 'object' || !isPgQueryable(options.pool)) {
    throw new InvalidOptionsError('postgresOutboxSource: `pool` must have query(text, values)');
  }
  knownFields(options, 'postgresOutboxSource', SOURCE_FIELDS);
  const { pool } = options;
  const names = postgresOutboxNames(options.schema, options.table);
  const listen = booleanOption(options.listen, 'postgresOutboxSource: listen', true);
  const reconnectDelayMs = options.reconnectDelayMs ?? 1000;
  // NaN or a negative delay would make setTimeout fire at once: a reconnect storm while the server is down.
  if (
    typeof reconnectDelayMs !== 'number' ||
    !(reconnectDelayMs >= 0 && reconnectDelayMs <= MAX_TIMER_MS)
  ) {
    throw new InvalidOptionsError(
      `postgresOutboxSource: reconnectDelayMs must be a non-negative number of milliseconds, got ${shownValue(reconnectDelayMs)}`,
    );
  }
  if (listen && !isPgPool(pool)) {
    throw new InvalidOptionsError(
      'postgresOutboxSource: `listen` needs a Pool (to hold one connection in LISTEN); pass listen: false to poll only',
    );
  }
  // LISTEN keeps one connection for good: with a pool of one, every claim would wait for a connection
  // forever, and the relay would sit idle (and stop() hang) without a single error.
  const poolMax = (pool as { options?: { max?: unknown } }).options?.max;
  if (listen && typeof poolMax === 'number' && poolMax < 2) {
    throw new InvalidOptionsError(
      'postgresOutboxSource: `listen` holds one connection of the pool, so the pool needs max >= 2 (or pass listen: false)',
    );
  }
  const text = {
    claim: renderOutboxSql(sql.postgresClaim, names),
    markSent: renderOutboxSql(sql.postgresMarkSent, names),
    markFailed: renderOutboxSql(sql.postgresMarkFailed, names),
    release: renderOutboxSql(sql.postgresRelease, names),
    purgeSent: renderOutboxSql(sql.postgresPurgeSent, names),
    stats: renderOutboxSql(sql.postgresStats, names),
  };

  // Each statement alone, in autocommit; run again on a serialization failure (see postgres-statement.ts).
  const run = (operation: string, query: string, values: unknown[] = []) =>
    runStatement(pool, operation, query, values);

  const source: OutboxSource = {
    async claim(limit, leaseMs, maxBytes) {
      const { rows } = await run('claim', text.claim, [
        limit,
        Math.ceil(leaseMs),
        maxBytes ?? null,
        MAX_POSTGRES_PAYLOAD_BYTES,
      ]);
      // A row whose payload the claim did not send cannot be published, but it is not dropped from the
      // batch: the relay fails it (backoff, onPublishFailed) instead of leaving it to last_error alone.
      return (rows as ClaimedRow[]).map(toMessage).sort(byRowId);
    },
    async markSent(rowIds) {
      if (rowIds.length === 0) return 0;
      const result = await run('markSent', text.markSent, [rowIds]);
      return result.rowCount ?? 0;
    },
    async markFailed(rowId, retryInMs, error, attempt) {
      await run('markFailed', text.markFailed, [
        rowId,
        Math.ceil(retryInMs),
        error,
        attempt ?? null,
      ]);
    },
    async release(rows) {
      if (rows.length === 0) return;
      await run('release', text.release, [
        rows.map((row) => row.rowId),
        rows.map((row) => row.attempt),
      ]);
    },
    async purgeSent(retentionMs, limit) {
      const result = await run('purgeSent', text.purgeSent, [Math.floor(retentionMs), limit]);
      return result.rowCount ?? 0;
    },
    async stats(): Promise<OutboxStats> {
      const { rows } = await run('stats', text.stats);
      const row = rows[0] as Record<string, number | null>;
      return {
        unsent: Number(row.unsent ?? 0),
        failing: Number(row.failing ?? 0),
        sent: Number(row.sent ?? 0),
        maxAttempts: Number(row.max_attempts ?? 0),
        oldestUnsentAgeMs: row.oldest_unsent_ms === null ? null : Number(row.oldest_unsent_ms),
      };
    },
  };
  if (listen && isPgPool(pool)) {
    source.subscribe = (wake, onError) =>
      subscribe(pool, names.channel, names.channelIdentifier, reconnectDelayMs, wake, onError);
  }
  return source;
}

function toMessage(row: ClaimedRow): ClaimedMessage {
  const message: ClaimedMessage = {
    id: row.message_id,
    topic: row.topic,
    key: row.message_key,
    payload: row.payload ?? Buffer.alloc(0),
    contentType: row.content_type,
    headers: parseHeaders(row.headers),
    rowId: String(row.row_id),
    attempt: Number(row.attempts),
    createdAt: new Date(row.created_at).getTime(),
  };
  // The claim leaves the payload out only with its reason (payload is NOT NULL in the table).
  if (row.payload === null) message.unreadable = row.unreadable ?? 'payload not read back';
  return message;
}

// Holds one connection in LISTEN; when it breaks (server restart, pg_terminate_backend) the connection is
// destroyed and a new one is set up after `delayMs`. Polling covers the gap, and a wake after every
// (re)subscribe picks up whatever committed while nobody listened.
async function subscribe(
  pool: PgPool,
  channel: string,
  channelIdentifier: string,
  delayMs: number,
  wake: () => void,
  onError: (error: unknown) => void,
): Promise<() => Promise<void>> {
  let closed = false;
  let client: PgPoolClient | undefined;
  let timer: NodeJS.Timeout | undefined;

  const onNotification = (message: unknown) => {
    if ((message as { channel?: unknown } | null)?.channel === channel) wake();
  };
  const drop = (error: unknown) => {
    const current = client;
    if (current === undefined) return;
    client = undefined;
    current.removeListener('notification', onNotification);
    current.removeListener('error', drop);
    // A broken connection must not go back into the pool.
    current.release(error instanceof Error ? error : true);
    if (closed) return;
    onError(outboxStoreError('listen', error));
    timer = setTimeout(() => void establish(), delayMs);
  };
  const establish = async () => {
    timer = undefined;
    if (closed) return;
    let next: PgPoolClient;
    // An 'error' listener is attached at the hand-over (an unhandled 'error' event would crash the
    // process); one that came before `drop` took over is passed on to it.
    let early: Error | undefined;
    let unguard: () => void;
    try {
      ({ client: next, unguard } = await checkOutGuarded(pool, (error) => {
        early ??= error;
      }));
    } catch (error) {
      onError(outboxStoreError('listen', error));
      if (!closed) timer = setTimeout(() => void establish(), delayMs);
      return;
    }
    next.on('error', drop);
    unguard();
    next.on('notification', onNotification);
    client = next;
    if (early !== undefined) {
      drop(early);
      return;
    }
    try {
      await next.query(`LISTEN ${channelIdentifier}`);
    } catch (error) {
      drop(error);
      return;
    }
    if (closed) {
      unlisten();
      return;
    }
    wake();
  };
  // Ends the LISTEN by closing its connection, not with an UNLISTEN: a round trip that a partitioned server
  // never answers held relay.stop() for the pool's query timeout, or for good without one, although the
  // relay had nothing in flight. A closed connection is never reused, so nothing is notified on it again.
  const unlisten = () => {
    const current = client;
    if (current === undefined) return;
    client = undefined;
    current.removeListener('notification', onNotification);
    current.removeListener('error', drop);
    // A late error of the closing connection (a reset) must not go unhandled: it would end the process.
    current.on('error', ignoreError);
    current.release(true);
  };

  await establish();
  return async () => {
    closed = true;
    if (timer !== undefined) clearTimeout(timer);
    unlisten();
  };
}

function ignoreError(): void {
  // The connection is being closed: what it reports no longer matters.
}
