/**
 * The SQLite {@link OutboxSource}: claims inside `BEGIN IMMEDIATE`, marks rows sent by id, purges sent rows
 * past retention, and is woken in-process by `enqueue` on the same `Database` object.
 * @module
 */
import { type Clock, systemClock } from '../core/clock.js';
import { InvalidOptionsError } from '../core/errors.js';
import { knownFields } from '../core/option-checks.js';
import { isSqliteDatabase, type SqliteDatabaseLike } from './clients.js';
import { outboxStoreError } from './errors.js';
import { onLocalEnqueue } from './local-wake.js';
import { type OutboxMessage, parseHeaders } from './message.js';
import { renderOutboxSql, sqliteOutboxNames } from './names.js';
import { byRowId, sqliteRowId, sqliteRowIdsJson } from './row-ids.js';
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

interface ClaimedRow {
  /** Text (`CAST(id AS TEXT)`): exact past 2^53, where a JavaScript number rounds. */
  row_id: string;
  message_id: string;
  topic: string;
  message_key: string | null;
  payload: Uint8Array;
  content_type: string;
  headers: string;
  attempts: number | bigint;
  created_at: number | bigint;
}

// Every key of SqliteOutboxSourceOptions, checked by the compiler both ways: a misspelt `tabel` would read
// the default table while `enqueue` writes another, and no message would ever be published.
const SOURCE_FIELDS = Object.keys({
  database: true,
  table: true,
  clock: true,
} as const satisfies Record<keyof SqliteOutboxSourceOptions, true>);

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
  knownFields(options, 'sqliteOutboxSource', SOURCE_FIELDS);
  const db = options.database;
  const clock = options.clock ?? systemClock;
  const names = sqliteOutboxNames(options.table);
  const text = {
    claim: renderOutboxSql(sql.sqliteClaim, names),
    markSent: renderOutboxSql(sql.sqliteMarkSent, names),
    markFailed: renderOutboxSql(sql.sqliteMarkFailed, names),
    release: renderOutboxSql(sql.sqliteRelease, names),
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

  // Ids marked sent while someone held a transaction open on this connection across an await (an async
  // query builder's transaction): the mark joined it, and a rollback would undo it, so that the rows would
  // be published again. The next claim, which runs only outside any transaction, marks them again first
  // (by id: a no-op for rows that stayed sent). Waiting for that transaction to end instead would stall the
  // mark behind an application that keeps one open most of the time.
  const markedInForeignTransaction = new Set<string>();

  return {
    claim: (limit, leaseMs, maxBytes) =>
      run('claim', () => {
        // Someone holds a transaction open on this connection across an await: claiming now would nest
        // in it (a savepoint) and vanish with its rollback. Try again on the next round.
        if (db.inTransaction) return [];
        const now = clock.now();
        const claim = db.transaction(() => {
          if (markedInForeignTransaction.size > 0) {
            const ids = sqliteRowIdsJson(markedInForeignTransaction);
            prepared(db, text.markSent).run({ ids, now });
            markedInForeignTransaction.clear();
          }
          return prepared(db, text.claim).all({
            now,
            lease_until: now + Math.ceil(leaseMs),
            limit,
            max_bytes: maxBytes ?? null,
          }) as ClaimedRow[];
        });
        return claim.immediate().map(toMessage).sort(byRowId);
      }),
    markSent: (rowIds) =>
      run('markSent', () => {
        if (rowIds.length === 0) return 0;
        // Exact integers, never JavaScript numbers: past 2^53 a rounded id marks another row sent, and
        // that row's message is then never published.
        const ids = sqliteRowIdsJson(rowIds);
        if (db.inTransaction) for (const id of rowIds) markedInForeignTransaction.add(id);
        return prepared(db, text.markSent).run({ ids, now: clock.now() }).changes;
      }),
    markFailed: (rowId, retryInMs, error, attempt) =>
      run('markFailed', () => {
        prepared(db, text.markFailed).run({
          id: sqliteRowId(rowId),
          available_at: clock.now() + Math.ceil(retryInMs),
          error,
          attempt: attempt ?? null,
        });
      }),
    // Inside an application's transaction held open on this connection, the hand-back joins it: a rollback
    // undoes it, and the rows then simply wait for their lease, as without a release.
    release: (rows) =>
      run('release', () => {
        if (rows.length === 0) return;
        const now = clock.now();
        const statement = prepared(db, text.release);
        db.transaction(() => {
          for (const row of rows)
            statement.run({ id: sqliteRowId(row.rowId), attempt: row.attempt, now });
        })();
      }),
    purgeSent: (retentionMs, limit) =>
      run('purgeSent', () => {
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
      const off = onLocalEnqueue(db, names.tableName, wake);
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
    rowId: row.row_id,
    attempt: Number(row.attempts),
    createdAt: Number(row.created_at),
  };
}
