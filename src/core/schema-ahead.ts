/**
 * A table that a newer release migrated further than this one knows: its migrations table records ids this
 * release has no migration for. Every migrator (the records table's `migrate()` and the outbox's
 * `migrateOutbox()`, on PostgreSQL and SQLite) reports it the same way, in `schemaVersion` and `warning`,
 * rather than refusing: during a rolling deploy older code starts up beside newer code on the same table, and
 * must keep running as long as the newer migrations keep older code working.
 * @module
 */
import type { MigrationRow } from './migrations-owner.js';

/** What a migrator adds to its result for a table ahead of this release; empty for any other table. */
export interface SchemaAhead {
  /** Id of the newest migration recorded for the table, greater than the release's `version`. */
  schemaVersion?: number;
  /** Says the table is ahead of this release and names the newer migrations, for the log. */
  warning?: string;
}

/**
 * Compare the rows of a migrations table with `version`, the newest migration this release knows.
 * @param rows - The migrations table as read (`SELECT id, name`), in any order; ids may be bigints (SQLite).
 * @param table - The table as the warning names it (`schema.table` on PostgreSQL, `table` on SQLite).
 * @returns `{ schemaVersion, warning }` when rows newer than `version` are recorded, `{}` otherwise, so that
 * spread into a result it leaves an up-to-date table's result as it was.
 */
export function schemaAhead(
  rows: readonly MigrationRow[],
  version: number,
  table: string,
): SchemaAhead {
  const newer = rows
    .map((row) => ({ id: Number(row.id), name: String(row.name) }))
    .filter((row) => row.id > version)
    .sort((a, b) => a.id - b.id);
  if (newer.length === 0) return {};
  const schemaVersion = newer[newer.length - 1]!.id;
  const warning =
    `${table} is at version ${schemaVersion}, newer than this release knows (${version}): a newer ` +
    `release applied ${newer.map((row) => row.name).join(', ')}. Nothing was applied or undone; this ` +
    'release runs on it as long as those migrations keep older code working (see their release notes)';
  return { schemaVersion, warning };
}
