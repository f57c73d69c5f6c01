-- complete: the in-progress record held by @token, with a live lease, becomes completed (its reservation,
-- if any, ends: the outcome's retention guards the key from now on; its recorded steps are cleared: a
-- completed record replays its outcome and never needs them).
-- Params: @key TEXT, @token INTEGER, @outcome BLOB, @now INTEGER (epoch ms), @expires_at INTEGER (epoch ms,
--         now + retention).
-- Returns: changes = 1 when completed, 0 when fenced out (or already completed: see is-completed-by.sql).
UPDATE "idempotency_records"
SET status = 'completed', outcome = @outcome, completed_at = @now, expires_at = @expires_at,
    reserved_until = NULL, steps = NULL
WHERE key = @key AND status = 'in_progress' AND token = @token AND expires_at > @now;
