-- purge: delete one bounded batch of dead rows (expired outcomes and dead leases), never a live lease.
-- SKIP LOCKED passes over rows a concurrent claim is taking over; FOR UPDATE re-checks expires_at on the
-- newest row version, and the DELETE checks it again, so a row taken over meanwhile is never deleted.
-- $1 batch size (integer).
-- Returns one row: deleted (bigint text).
WITH doomed AS (
  SELECT key FROM {{table}}
  WHERE expires_at <= now()
  ORDER BY expires_at
  LIMIT $1
  FOR UPDATE SKIP LOCKED
),
deleted AS (
  DELETE FROM {{table}} AS r
  USING doomed
  WHERE r.key = doomed.key AND r.expires_at <= now()
  RETURNING 1
)
SELECT count(*) AS deleted FROM deleted;
