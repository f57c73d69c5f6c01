/**
 * How `migrate()` waits for the locks its migrations take while the service is serving. A statement such as
 * `ALTER TABLE` needs an ACCESS EXCLUSIVE lock, and PostgreSQL queues it behind any transaction that touched
 * the table (a `postgresTransactional` run, an analyst's open transaction); every later statement on the
 * table, every claim, then queues behind the migration, and the claims give up after their own 100 ms lock
 * timeout (answered in progress). So a migration waits at most `lockTimeoutMs` for a lock, then rolls back
 * and retries after a backoff, a bounded number of times; claims are held up for one wait at most at a time.
 * @module
 */
import type { Duration } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import { durationOption, shownValue } from '../core/option-checks.js';
import type { PgQueryable } from './client.js';

/** How long one attempt of a migration waits for a lock, by default. */
export const DEFAULT_MIGRATE_LOCK_TIMEOUT_MS = 2_000;

/** How many times a migration that timed out waiting for a lock is tried again, by default. */
export const DEFAULT_MIGRATE_LOCK_RETRIES = 4;

/** The lock waits of {@link migrate}'s migrations, as validated. */
export interface MigrateLockWait {
  /** Longest wait for one lock, in ms (the transaction's `lock_timeout`). */
  lockTimeoutMs: number;
  /** Attempts after the first. */
  lockRetries: number;
}

/**
 * The validated lock options of `migrate()`: a positive duration, and a whole number of retries (0: none).
 * @throws InvalidOptionsError for anything else.
 */
export function migrateLockWait(options: {
  lockTimeoutMs?: Duration;
  lockRetries?: number;
}): MigrateLockWait {
  const lockTimeoutMs = durationOption(
    options.lockTimeoutMs,
    'migrate: lockTimeoutMs',
    DEFAULT_MIGRATE_LOCK_TIMEOUT_MS,
    // lock_timeout takes whole ms, up to INT_MAX.
    { integer: true, maxMs: 2_147_483_647 },
  );
  const retries = options.lockRetries ?? DEFAULT_MIGRATE_LOCK_RETRIES;
  if (typeof retries !== 'number' || !Number.isSafeInteger(retries) || retries < 0) {
    throw new InvalidOptionsError(
      `migrate: lockRetries: must be a non-negative integer, got ${shownValue(retries)}`,
    );
  }
  return { lockTimeoutMs, lockRetries: retries };
}

/**
 * The pause before retry number `retry` (1, 2, …): the lock timeout, doubled each time, capped at 30 s, with
 * up to a quarter of jitter. Never shorter than one wait, so the claims run at least half of the time; the
 * blocking transaction usually ends within seconds, and a doubling pause reaches it with few attempts.
 */
export function migrateRetryDelayMs(lockTimeoutMs: number, retry: number): number {
  const base = Math.min(lockTimeoutMs * 2 ** (retry - 1), 30_000);
  return Math.max(lockTimeoutMs, base * (1 - Math.random() / 4));
}

/** What a backend holding a lock on the table is doing, as `pg_stat_activity` shows it. */
interface LockHolderRow {
  pid: number;
  state: string | null;
  seconds: number | null;
  query: string | null;
}

/**
 * The other backends holding a lock on `table` (a quoted, qualified name), as a `pid …: state for N s, "…"`
 * list for the error message; `''` when none is seen or the query fails (it is only a hint). Run after the
 * failed attempt was rolled back, on the migrator's connection.
 */
export async function describeLockHolders(client: PgQueryable, table: string): Promise<string> {
  try {
    // clock_timestamp(), not now(): the migrator's own transaction started before its attempts. The query's
    // leading comment lines (the store's SQL files start with some) say less than its first statement.
    const { rows } = await client.query(
      `SELECT DISTINCT a.pid, a.state,
         floor(extract(epoch FROM clock_timestamp() - a.xact_start))::int AS seconds,
         left(regexp_replace(a.query, '^(\\s*--[^\\n]*\\n)*\\s*', ''), 80) AS query
       FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
       WHERE l.locktype = 'relation' AND l.relation = to_regclass($1) AND l.granted
         AND l.pid <> pg_backend_pid()
       ORDER BY a.pid`,
      [table],
    );
    return (rows as LockHolderRow[])
      .map(
        (row) =>
          `pid ${row.pid}: ${row.state ?? 'unknown state'}` +
          `${row.seconds === null ? '' : `, transaction open for ${row.seconds} s`}` +
          `${row.query ? `, last statement ${JSON.stringify(row.query)}` : ''}`,
      )
      .join('; ');
  } catch {
    return '';
  }
}

/**
 * The message of a migration that never got its lock: which migration, how long each attempt waited, who
 * held the table, and what to do.
 */
export function lockTimeoutMessage(
  migration: string,
  table: string,
  wait: MigrateLockWait,
  holders: string,
): string {
  const attempts = wait.lockRetries + 1;
  return (
    `migrate: gave up on migration ${migration} after ${attempts} attempt${attempts === 1 ? '' : 's'}: ` +
    `each waited ${wait.lockTimeoutMs} ms (lock_timeout) for a lock on ${table} that another transaction ` +
    `holds${holders === '' ? '' : ` (${holders})`}. Nothing was applied, and claims were held up for one ` +
    'wait at most at a time. End or wait for the long transaction on that table (pg_stat_activity, ' +
    'pg_blocking_pids(); pg_terminate_backend() for one left open), then run migrate again, or raise ' +
    'lockTimeoutMs / lockRetries (--lock-timeout / --lock-retries of `idempotency-kit migrate`)'
  );
}
