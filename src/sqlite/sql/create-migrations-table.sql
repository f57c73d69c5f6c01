-- create-migrations-table: the schema version table of one records table (idempotent).
-- Params: none. Returns: nothing.
CREATE TABLE IF NOT EXISTS "idempotency_records_migrations" (
  id         INTEGER NOT NULL PRIMARY KEY,
  name       TEXT    NOT NULL,
  applied_at INTEGER NOT NULL
);
