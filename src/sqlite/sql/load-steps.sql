-- load-steps: the step results recorded on the in-progress record held by @token, with a live lease (the
-- guard of save-step.sql): those this claim saved and those of the attempts it took over with the same
-- fingerprint (claim.sql keeps them).
-- Params: @key TEXT, @token INTEGER, @now INTEGER (epoch ms, app clock).
-- Returns: zero rows when fenced out (wrong token, expired lease, completed, absent), else one row (steps:
--          a JSON object, step name → base64 of the result's bytes; '{}' when none was recorded).
SELECT coalesce(steps, '{}') AS steps
FROM "idempotency_records"
WHERE key = @key AND status = 'in_progress' AND token = @token AND expires_at > @now;
