/**
 * What `sqliteStore` and `sqliteTransactional` do with their own `migrate()`'s report of a table that a
 * newer release migrated further (`MigrateResult.warning`): pass it to `onWarning`, by default
 * `console.warn`, as the Redis store does with its startup warning. Kept, rather than dropped with the
 * rest of the result, because the store does keep serving on such a table: the operator reading the log
 * is the one who must know that a rollback or a mixed deploy left it there.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import { shownValue } from '../core/option-checks.js';
import type { MigrateResult } from './migrate.js';

/** A warning a SQLite store reports through its `onWarning` option. */
export interface SqliteStoreWarning {
  /** Stable code: `schema_ahead` when a newer release migrated the table further than this one knows. */
  code: 'schema_ahead';
  /** Human-readable: the table, its version, the newer migrations (`MigrateResult.warning`). */
  message: string;
  /** Id of the newest migration this release knows (`MigrateResult.version`). */
  version: number;
  /** Id of the newest migration recorded for the table (`MigrateResult.schemaVersion`). */
  schemaVersion: number;
}

/** `onWarning` checked: a function, by default one that logs the message with `console.warn`. */
export function onWarningOption(
  value: unknown,
  context: string,
): (warning: SqliteStoreWarning) => void {
  if (value === undefined || value === null) {
    return (warning) => console.warn(`idempotency-kit: ${warning.message}`);
  }
  if (typeof value !== 'function') {
    throw new InvalidOptionsError(
      `${context}: onWarning: expected a function, got ${shownValue(value)}`,
    );
  }
  return value as (warning: SqliteStoreWarning) => void;
}

/** Pass the warning of a migration `result`, if it has one, to `onWarning`. */
export function reportMigration(
  result: MigrateResult,
  onWarning: (warning: SqliteStoreWarning) => void,
): void {
  if (result.warning === undefined || result.schemaVersion === undefined) return;
  onWarning({
    code: 'schema_ahead',
    message: result.warning,
    version: result.version,
    schemaVersion: result.schemaVersion,
  });
}
