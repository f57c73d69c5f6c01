/**
 * A per-connection cache of prepared SQLite statements, so hot paths (enqueue, claim) compile their SQL once.
 * @module
 */
import type { SqliteDatabaseLike, SqliteStatementLike } from './clients.js';

const cache = new WeakMap<SqliteDatabaseLike, Map<string, SqliteStatementLike>>();

/** The statement for `source` on `db`, compiled on first use. */
export function prepared(db: SqliteDatabaseLike, source: string): SqliteStatementLike {
  let statements = cache.get(db);
  if (statements === undefined) {
    statements = new Map();
    cache.set(db, statements);
  }
  let statement = statements.get(source);
  if (statement === undefined) {
    statement = db.prepare(source);
    statements.set(source, statement);
  }
  return statement;
}
