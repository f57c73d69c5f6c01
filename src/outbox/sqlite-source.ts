/**
 * The SQLite {@link OutboxSource}: claims inside `BEGIN IMMEDIATE`, marks rows sent by id, purges sent rows
 * past retention, and is woken in-process by `enqueue` on the same `Database` object.
 * @module
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Clock, systemClock } from '../core/clock.js';
import { InvalidOptionsError } from '../core/errors.js';
import { isSqliteDatabase, type SqliteDatabaseLike } from './clients.js';
import { outboxStoreError } from './errors.js';
import { onLocalEnqueue } from './local-wake.js';
import { type OutboxMessage, parseHeaders } from './message.js';
import { renderOutboxSql, sqliteOutboxNames } from './names.js';
import type { OutboxSource, OutboxStats } from './source.js';
import * as sql from './sql.gen.js';
import { prepared } from './sqlite-prepared.js';

/** Options of {@link sqliteOutboxSource}. */
export interface SqliteOutboxSourceOptions {
  /**
   * An open better-sqlite3 `Database`. It may be the connection the application enqueues on (the embedded
   * default: one process, woken at once) or a separate connection, even in another process (then the relay
   * finds new rows by polling).
   */
  database: SqliteDatabaseLike;
  /** Name of the outbox table. @default 'idempotency_outbox' */
  table?: string;
  /** Source of time for leases, backoff and retention. @default systemClock */
  clock?: Clock;
}

/** How long a mark or purge waits for a transaction someone else holds open on the connection. */
const FOREIGN_TRANSACTION_WAIT_MS = 5000;
const FOREIGN_TRANSACTION_POLL_MS = 5;

interface ClaimedRow {
  row_id: number | bigint;
  message_id: string;
  topic: string;
  message_key: string | null;
  payload: Uint8Array;
  content_type: string;
  headers: string;
  attempts: number | bigint;
  created_at: number | bigint;
}

/**
 * The outbox table in SQLite as a relay's source. Each claim is one `BEGIN IMMEDIATE` transaction, so relays
 * in several processes never claim the same row; the lease column keeps it theirs while they publish.
 * @example
 * const source = sqliteOutboxSource({ database: db });
 * const relay = createRelay({ source, publisher: bus });
 * relay.start();
 */
export function sqliteOutboxSource(options: SqliteOutboxSourceOptions): OutboxSource {
  if (options === null || typeof options !== 'object' || !isSqliteDatabase(options.database)) {
    throw new InvalidOptionsError(
      'sqliteOutboxSource: `database` must be a better-sqlite3 Database',
    );
  }
  const db = options.database;
  const clock = options.clock ?? systemClock;
  const names = sqliteOutboxNames(options.table);
  const text = {
    claim: renderOutboxSql(sql.sqliteClaim, names),
    markSent: renderOutboxSql(sql.sqliteMarkSent, names),
    markFailed: renderOutboxSql(sql.sqliteMarkFailed, names),
    purgeSent: renderOutboxSql(sql.sqlitePurgeSent, names),
    stats: renderOutboxSql(sql.sqliteStats, names),
  };

  // better-sqlite3 is synchronous: each call is atomic within the process, and failures become rejections.
  const run = async <T>(operation: string, fn: () => T): Promise<T> => {
    try {
      return fn();
    } catch (error) {
      throw outboxStoreError(operation, error);
    }
  };

  // A write (mark, purge) issued while someone holds a transaction open on this connection across an
  // await (an async query builder's transaction) would become part of it: rolled back with it, a mark
  // vanishes and the row is published again. Wait for that transaction to end, then write at once (no
  // await in between, so nothing can open another one first).
  const write = async <T>(operation: string, fn: () => T): Promise<T> => {
    const deadline = performance.now() + FOREIGN_TRANSACTION_WAIT_MS;
    while (db.inTransaction) {
      if (performance.now() >= deadline) {
        throw outboxStoreError(
          operation,
          new Error(
            `a transaction stayed open on the connection for ${FOREIGN_TRANSACTION_WAIT_MS} ms; not writing inside it`,
          ),
        );
      }
      await sleep(FOREIGN_TRANSACTION_POLL_MS);
    }
    return run(operation, fn);
  };

  return {
    claim: (limit, leaseMs) =>
      run('claim', () => {
        // Someone holds a transaction open on this connection across an await: claiming now would nest
        // in it (a savepoint) and vanish with its rollback. Try again on the next round.
        if (db.inTransaction) return [];
        const now = clock.now();
        const claim = db.transaction(
          () =>
            prepared(db, text.claim).all({
              now,
              lease_until: now + Math.ceil(leaseMs),
              limit,
            }) as ClaimedRow[],
        );
        return claim
          .immediate()
          .map(toMessage)
          .sort((a, b) => Number(a.rowId) - Number(b.rowId));
      }),
    markSent: (rowIds) =>
      write('markSent', () => {
        if (rowIds.length === 0) return 0;
        const ids = JSON.stringify(rowIds.map(Number));
        return prepared(db, text.markSent).run({ ids, now: clock.now() }).changes;
      }),
    markFailed: (rowId, retryInMs, error) =>
      write('markFailed', () => {
        prepared(db, text.markFailed).run({
          id: Number(rowId),
          available_at: clock.now() + Math.ceil(retryInMs),
          error,
        });
      }),
    purgeSent: (retentionMs, limit) =>
      write('purgeSent', () => {
        const before = clock.now() - Math.floor(retentionMs);
        return prepared(db, text.purgeSent).run({ before, limit }).changes;
      }),
    stats: () =>
      run('stats', (): OutboxStats => {
        const row = prepared(db, text.stats).get() as Record<string, number | bigint | null>;
        const oldest = row.oldest_created_at ?? null;
        return {
          unsent: Number(row.unsent ?? 0),
          failing: Number(row.failing ?? 0),
          sent: Number(row.sent ?? 0),
          maxAttempts: Number(row.max_attempts ?? 0),
          oldestUnsentAgeMs: oldest === null ? null : Math.max(0, clock.now() - Number(oldest)),
        };
      }),
    subscribe: async (wake) => {
      const off = onLocalEnqueue(db, wake);
      return async () => off();
    },
  };
}

function toMessage(row: ClaimedRow): OutboxMessage {
  return {
    id: row.message_id,
    topic: row.topic,
    key: row.message_key,
    payload: row.payload,
    contentType: row.content_type,
    headers: parseHeaders(row.headers),
    rowId: String(row.row_id),
    attempt: Number(row.attempts),
    createdAt: Number(row.created_at),
  };
}
