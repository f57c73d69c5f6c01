-- extend: push the lease of the in-progress record held by @token, while it is still live. The reservation
-- (reserved_until) is left as it is: it ends at max(expires_at, reserved_until), so an extension can move
-- it later, never earlier.
-- Params: @key TEXT, @token INTEGER, @now INTEGER (epoch ms), @lease_until INTEGER (epoch ms).
-- Returns: changes = 1 when extended, else 0.
UPDATE "idempotency_records"
SET expires_at = @lease_until
WHERE key = @key AND status = 'in_progress' AND token = @token AND expires_at > @now;
