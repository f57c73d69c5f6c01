-- create-migrations-table: the schema-version table migrate() records applied migrations in.
-- Placeholders: {{migrationsTable}}. $n params: none. Returns: nothing.
-- Runs inside migrate()'s transaction, after its advisory lock, so concurrent migrators never race here;
-- the schema was created just before (createSchemaIfMissing: migrators of other tables may race for it).
CREATE TABLE IF NOT EXISTS {{migrationsTable}} (
  id         integer     PRIMARY KEY,
  name       text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);
