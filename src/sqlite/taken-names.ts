/**
 * Which of some names are taken in a SQLite database, and by what: the catalog read behind the check that
 * a records table or an outbox is not named after another one's objects (see `core/derived-names.ts`).
 * @module
 */
import {
  checkDerivedNames,
  type ExistingObject,
  namesToLookUp,
  type ObjectFamily,
  SQLITE_FAMILIES,
} from '../core/derived-names.js';

/** What the read needs of a connection (better-sqlite3's `Database`). */
interface Preparable {
  prepare(source: string): { all(...params: unknown[]): unknown[] };
}

// Tables, indexes, views and triggers share one namespace, and SQLite compares names without case.
const TAKEN = `SELECT name, type FROM sqlite_schema
  WHERE lower(name) IN (SELECT lower(value) FROM json_each(?))`;
const COLUMNS = 'SELECT name FROM pragma_table_info(?) ORDER BY name';

/** The objects of the main database named one of `names` (in any case), by lowercased name. */
export function takenNames(db: Preparable, names: readonly string[]): Map<string, ExistingObject> {
  const rows = db.prepare(TAKEN).all(JSON.stringify(names)) as Array<{
    name: string;
    type: string;
  }>;
  return new Map(
    rows.map((row) => {
      const columns =
        row.type === 'table'
          ? (db.prepare(COLUMNS).all(row.name) as Array<{ name: string }>).map((c) => c.name)
          : [];
      const migrationsShaped = columns.join(',') === 'applied_at,id,name';
      return [row.name.toLowerCase(), { type: row.type, migrationsShaped }];
    }),
  );
}

/**
 * The derived-names check of `table` (of `family`) in the main database, its catalog read now: call it
 * with `creating: false` before the migrations table is created, then with whether migration 1 is still
 * to apply (see `checkDerivedNames`). Names compared without case, as SQLite does.
 */
export function sqliteNamesCheck(
  db: Preparable,
  operation: string,
  table: string,
  family: ObjectFamily,
): (creating: boolean) => void {
  const existing = takenNames(db, namesToLookUp(table, family, SQLITE_FAMILIES));
  return (creating) =>
    checkDerivedNames({
      operation,
      table,
      family,
      families: SQLITE_FAMILIES,
      existing,
      creating,
      qualify: (name) => name,
      caseInsensitive: true,
    });
}
