-- select-migrations: the migrations already applied.
-- Params: none. Returns: one row (id INTEGER, name TEXT) per applied migration, in order. The name tells
-- a records table's migrations from an outbox's of the same table name (migrate() refuses the latter).
SELECT id, name FROM "idempotency_records_migrations" ORDER BY id;
