-- sqlite-create-migrations-table: the table migrateOutbox() records applied migrations in.
-- Placeholders: {{migrationsTable}}. Parameters: none. Returns: nothing.
CREATE TABLE IF NOT EXISTS {{migrationsTable}} (
  id         INTEGER PRIMARY KEY,
  name       TEXT    NOT NULL,
  applied_at INTEGER NOT NULL
) STRICT;
