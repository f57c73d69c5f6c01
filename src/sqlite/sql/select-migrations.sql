-- select-migrations: the migrations already applied.
-- Params: none. Returns: one row (id INTEGER) per applied migration, in order.
SELECT id FROM "idempotency_records_migrations" ORDER BY id;
