-- create-migrations-table: the schema-version table migrate() records applied migrations in.
-- Placeholders: {{schema}}, {{migrationsTable}}. $n params: none. Returns: nothing.
-- Runs inside migrate()'s transaction, after its advisory lock, so concurrent migrators never race here.
CREATE SCHEMA IF NOT EXISTS {{schema}};
CREATE TABLE IF NOT EXISTS {{migrationsTable}} (
  id         integer     PRIMARY KEY,
  name       text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);
