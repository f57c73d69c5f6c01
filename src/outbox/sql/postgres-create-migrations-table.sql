-- postgres-create-migrations-table: the table migrateOutbox() records applied migrations in.
-- Placeholders: {{migrationsTable}}. $n params: none. Returns: nothing.
-- Runs inside migrateOutbox()'s transaction, after its advisory lock, so concurrent migrators never race here;
-- the schema was created just before (createSchemaIfMissing: migrators of other tables may race for it).
CREATE TABLE IF NOT EXISTS {{migrationsTable}} (
  id         integer     PRIMARY KEY,
  name       text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);
