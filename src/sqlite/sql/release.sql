-- release: delete the in-progress record held by @token, with a live lease.
-- Params: @key TEXT, @token INTEGER, @now INTEGER (epoch ms). Returns: changes = 1 when released, else 0.
DELETE FROM "idempotency_records"
WHERE key = @key AND status = 'in_progress' AND token = @token AND expires_at > @now;
