-- complete: the in_progress record held by this token, with a live lease, becomes completed. A resend by
-- the same token after success is a no-op that still reports success (read only, nothing written). The
-- claim's recorded steps (migration 0005) are cleared: a completed record replays its outcome instead.
-- $1 key text, $2 token bigint, $3 outcome bytea, $4 retention in ms (float8).
-- Returns one row: ok boolean (false = fenced out: taken over, expired or removed).
WITH done AS (
  UPDATE {{table}}
  SET status = 'completed', outcome = $3, completed_at = now(),
    expires_at = now() + $4::float8 * interval '1 millisecond', steps = NULL
  WHERE key = $1 AND token = $2 AND status = 'in_progress' AND expires_at > now()
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM done)
  OR EXISTS (
    SELECT 1 FROM {{table}}
    WHERE key = $1 AND token = $2 AND status = 'completed' AND expires_at > now()
  ) AS ok;
