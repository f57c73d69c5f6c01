-- purge: delete one bounded batch of dead rows (expired outcomes and dead leases), never a live lease, nor a
-- dead lease still reserved for its fingerprint (reserved_until in the future, migration 0005): that row is
-- what makes a claim with another fingerprint a mismatch. It is deleted once its reservation ends.
-- SKIP LOCKED passes over rows a concurrent claim is taking over; FOR UPDATE re-checks the condition on the
-- newest row version, and the DELETE checks it again, so a row taken over meanwhile is never deleted.
-- Reserved dead leases sort among the dead rows by expires_at, and each batch walks past them: crashed
-- claims are few.
-- $1 batch size (integer).
-- Returns one row: deleted (bigint text).
WITH doomed AS (
  SELECT key FROM {{table}}
  WHERE expires_at <= now()
    AND (status = 'completed' OR reserved_until IS NULL OR reserved_until <= now())
  ORDER BY expires_at
  LIMIT $1
  FOR UPDATE SKIP LOCKED
),
deleted AS (
  DELETE FROM {{table}} AS r
  USING doomed
  WHERE r.key = doomed.key AND r.expires_at <= now()
    AND (r.status = 'completed' OR r.reserved_until IS NULL OR r.reserved_until <= now())
  RETURNING 1
)
SELECT count(*) AS deleted FROM deleted;
