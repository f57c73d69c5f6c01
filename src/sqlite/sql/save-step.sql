-- save-step: record @value as the result of step @name on the in-progress record held by @token, with a
-- live lease (the guard of complete.sql and extend.sql), replacing an earlier result of that name.
-- `steps` is a JSON object, step name → result bytes in base64 (see 0002_reservations_and_steps.sql). The
-- name is quoted in the JSON path: an unquoted `$.a.b` would mean the member b of a member a. Names match
-- [A-Za-z0-9._:-]{1,100} (the store checks), so they hold no `"` and cannot leave the quotes.
-- json_set re-reads and rewrites the whole object: a save costs the size of every step recorded so far.
-- Params: @key TEXT, @token INTEGER, @name TEXT (the step name), @value TEXT (base64 of the result's bytes),
--         @now INTEGER (epoch ms, app clock).
-- Returns: changes = 1 when recorded, 0 when fenced out (wrong token, expired lease, completed, absent).
UPDATE "idempotency_records"
SET steps = json_set(coalesce(steps, '{}'), '$."' || @name || '"', @value)
WHERE key = @key AND status = 'in_progress' AND token = @token AND expires_at > @now;
