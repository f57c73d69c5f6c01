/**
 * Creating a migration's schema when two migrators race to create it.
 * @module
 */
import { sqlState } from './client.js';

/** What {@link createSchemaIfMissing} needs of a connection: one inside an open transaction. */
interface Queryable {
  query(text: string): Promise<unknown>;
}

// 23505: `IF NOT EXISTS` checks the catalog before inserting, so two transactions creating one new
// schema both pass the check, and the later insert then fails on pg_namespace's unique index once the
// first commits. 42P06 (duplicate_schema) is the same race seen before the insert.
const CONCURRENTLY_CREATED = new Set(['23505', '42P06']);

/**
 * `CREATE SCHEMA IF NOT EXISTS schema` inside the caller's transaction, carrying on when a concurrent
 * transaction created the schema first. Each migrator's advisory lock is keyed by schema and table, so
 * unrelated tables migrate in parallel; the schema they share is the one object they race for. The
 * statement runs under a savepoint, so that losing the race leaves the transaction usable.
 * @param schema The quoted schema name (`TableNames.schema`).
 */
export async function createSchemaIfMissing(client: Queryable, schema: string): Promise<void> {
  await client.query('SAVEPOINT idempotency_kit_create_schema');
  try {
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
  } catch (error) {
    const state = sqlState(error);
    if (state === undefined || !CONCURRENTLY_CREATED.has(state)) throw error;
    // The other transaction has committed the schema by now (its insert was waited for): use it.
    await client.query('ROLLBACK TO SAVEPOINT idempotency_kit_create_schema');
  }
  await client.query('RELEASE SAVEPOINT idempotency_kit_create_schema');
}
