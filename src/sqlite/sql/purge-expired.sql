-- purge-expired: delete at most @limit dead rows (expired leases and expired outcomes), oldest first.
-- A live lease has expires_at > @now and is never selected.
-- Params: @now INTEGER (epoch ms), @limit INTEGER. Returns: changes = rows deleted.
DELETE FROM "idempotency_records"
WHERE key IN (
  SELECT key FROM "idempotency_records" WHERE expires_at <= @now ORDER BY expires_at LIMIT @limit
);
