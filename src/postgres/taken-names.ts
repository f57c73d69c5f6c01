/**
 * Which of some names are taken in a PostgreSQL schema, and by what: the catalog read behind the check that
 * a records table or an outbox is not named after another one's objects (see `core/derived-names.ts`).
 * @module
 */
import {
  checkDerivedNames,
  type ExistingObject,
  namesToLookUp,
  type ObjectFamily,
  POSTGRES_FAMILIES,
} from '../core/derived-names.js';

/** What the read needs of a connection. */
interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

// Tables, indexes, sequences, views and composite types share one namespace per schema (pg_class): a
// CREATE of any of them fails on a name another one has. Functions and triggers live elsewhere.
const TAKEN = `SELECT c.relname AS name,
  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' WHEN 'i' THEN 'index' WHEN 'I' THEN 'index'
    WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view'
    WHEN 'f' THEN 'foreign table' WHEN 'c' THEN 'composite type' ELSE 'relation' END AS type,
  c.relkind IN ('r', 'p') AND coalesce((SELECT array_agg(a.attname::text ORDER BY a.attname::text)
    FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)
    = ARRAY['applied_at', 'id', 'name'], false) AS migrations_shaped
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = ANY($2::text[])`;

/** The objects of `schema` named one of `names`, by name. */
export async function takenNames(
  client: Queryable,
  schema: string,
  names: readonly string[],
): Promise<Map<string, ExistingObject>> {
  const { rows } = await client.query(TAKEN, [schema, names]);
  return new Map(
    (rows as Array<{ name: string; type: string; migrations_shaped: boolean }>).map((row) => [
      row.name,
      { type: row.type, migrationsShaped: row.migrations_shaped },
    ]),
  );
}

/**
 * The derived-names check of `table` (of `family`) in `schema`, its catalog read now: call it with
 * `creating: false` before the migrations table is created, then with whether migration 1 is still to
 * apply (see `checkDerivedNames`).
 */
export async function postgresNamesCheck(
  client: Queryable,
  operation: string,
  schema: string,
  table: string,
  family: ObjectFamily,
): Promise<(creating: boolean) => void> {
  const existing = await takenNames(
    client,
    schema,
    namesToLookUp(table, family, POSTGRES_FAMILIES),
  );
  const qualify = (name: string) => `${schema}.${name}`;
  return (creating) =>
    checkDerivedNames({
      operation,
      table,
      family,
      families: POSTGRES_FAMILIES,
      existing,
      creating,
      qualify,
    });
}
