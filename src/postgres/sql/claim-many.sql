-- claim-many: claim.sql for a batch of distinct keys in ONE statement, one transaction, one commit. Each key is
-- created, taken over, or reported with its blocking record, exactly as claim.sql decides.
-- $1 keys text[] (distinct), $2 fingerprints text[], $3 leases in ms float8[], $4 reservations in ms
-- float8[] (0 = none), in the order of $1.
-- Returns one row per settled key: key, claimed boolean, then the columns claim.sql returns. A key with NO
-- row had its blocking row committed after the snapshot (see claim.sql): the caller claims it alone.
-- Keys are inserted in byte order ("C", the column's), so batches that share keys lock them in the same
-- order and cannot deadlock each other.
WITH input AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::float8[], $4::float8[])
    AS i(key, fingerprint, lease_ms, reserve_ms)
),
claimed AS (
  INSERT INTO {{table}} AS r
    (key, status, fingerprint, token, attempt, created_at, expires_at, reserved_until)
  SELECT key, 'in_progress', fingerprint, nextval('{{sequence}}'), 1, now(),
    now() + lease_ms * interval '1 millisecond',
    CASE WHEN reserve_ms > lease_ms THEN now() + reserve_ms * interval '1 millisecond' END
  FROM input
  ORDER BY key COLLATE "C"
  ON CONFLICT (key) DO UPDATE SET
    status = 'in_progress',
    fingerprint = excluded.fingerprint,
    token = GREATEST(r.token + 1, excluded.token),
    attempt = CASE WHEN r.status = 'in_progress' THEN r.attempt + 1 ELSE 1 END,
    created_at = CASE WHEN r.status = 'in_progress' THEN r.created_at ELSE excluded.created_at END,
    outcome = NULL,
    completed_at = NULL,
    expires_at = excluded.expires_at,
    reserved_until = excluded.reserved_until,
    -- Steps (0005): kept by the same request's takeover of its crashed lease, dropped otherwise.
    steps = CASE WHEN r.status = 'in_progress' AND r.fingerprint = excluded.fingerprint THEN r.steps END
  WHERE r.expires_at <= now()
    AND (r.status = 'completed' OR r.fingerprint = excluded.fingerprint
      OR r.reserved_until IS NULL OR r.reserved_until <= now())
  RETURNING r.key, r.token, r.attempt, r.expires_at
),
blocking AS (
  -- The rows the INSERT found live (or reserved) are already locked by it, so FOR SHARE returns their
  -- newest version without waiting. Only the keys left unclaimed are looked up: usually none, and an empty
  -- array scans nothing, where filtering after the lookup probed the index and the heap once per key of
  -- the batch.
  SELECT r.* FROM {{table}} AS r
  WHERE r.key = ANY (ARRAY(SELECT key FROM input EXCEPT SELECT key FROM claimed))
  FOR SHARE
)
SELECT key, true AS claimed, NULL::text AS status, NULL::text AS fingerprint, token, attempt,
  NULL::bytea AS outcome, NULL::float8 AS created_at_ms, NULL::float8 AS completed_at_ms,
  floor(date_part('epoch', expires_at) * 1000) AS expires_at_ms
FROM claimed
UNION ALL
SELECT key, false, status, fingerprint, token, attempt, outcome,
  floor(date_part('epoch', created_at) * 1000),
  floor(date_part('epoch', completed_at) * 1000),
  floor(date_part('epoch', expires_at) * 1000)
FROM blocking;
-- Keep the header above short: pg_stat_activity shows a statement's first 1 kB, which must name the table.
