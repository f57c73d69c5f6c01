-- is-completed-by: whether the live record is already completed by @token (a resend after success).
-- Params: @key TEXT, @token INTEGER, @now INTEGER (epoch ms). Returns: zero or one row (1 AS done).
SELECT 1 AS done
FROM "idempotency_records"
WHERE key = @key AND status = 'completed' AND token = @token AND expires_at > @now;
