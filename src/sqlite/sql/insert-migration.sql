-- insert-migration: record that a migration was applied (same transaction as the migration).
-- Params: @id INTEGER, @name TEXT, @applied_at INTEGER (epoch ms). Returns: nothing.
INSERT INTO "idempotency_records_migrations" (id, name, applied_at) VALUES (@id, @name, @applied_at);
