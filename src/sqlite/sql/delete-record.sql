-- delete-record: remove a key's row whatever its state (admin).
-- Params: @key TEXT, @now INTEGER (epoch ms).
-- Returns: zero or one row (live: 1 when the removed row was still live, else 0).
DELETE FROM "idempotency_records" WHERE key = @key RETURNING expires_at > @now AS live;
