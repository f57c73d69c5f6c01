/**
 * Whose migrations a `<table>_migrations` table records. The records table and the outbox name their
 * migrations table after their own table, so a records table and an outbox given the same name (two
 * applications configured on their own, on one database) share it: each migrator would read the other's
 * migrations as its own, report the table up to date, and leave the failure to the first write.
 * @module
 */
import { InvalidOptionsError } from './errors.js';

/** A row of a migrations table, as read by a migrator (`SELECT id, name`). */
export interface MigrationRow {
  id: unknown;
  name: unknown;
}

/**
 * Refuse a migrations table whose first migration is not `firstMigration`: it belongs to another kind of
 * table of the same name. Only migration 1 is compared, the one that created the table: a newer release's
 * later migrations, unknown to this one, do not make it foreign.
 * @param operation - Named first in the message (`migrate`, `migrateOutbox`).
 * @param migrationsTable - The table's name as the message shows it.
 * @throws InvalidOptionsError naming the migration found, when the table is another kind's.
 */
export function checkMigrationsOwner(
  rows: readonly MigrationRow[],
  firstMigration: string,
  operation: string,
  migrationsTable: string,
): void {
  const first = rows.find((row) => Number(row.id) === 1);
  if (first === undefined || first.name === firstMigration) return;
  throw new InvalidOptionsError(
    `${operation}: ${migrationsTable} records the migrations of another kind of table (${String(first.name)}, ` +
      `not ${firstMigration}): a records table and an outbox cannot have the same table name; give each its own`,
  );
}
