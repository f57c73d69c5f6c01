-- claim-many: claim.sql for a batch of distinct keys in ONE statement, one transaction, one commit. Each key is
-- created, taken over when dead, or reported with its live blocking record, exactly as claim.sql decides.
-- $1 keys text[] (distinct), $2 fingerprints text[], $3 leases in ms float8[] (same order as $1).
-- Returns one row per settled key: key, claimed boolean, then the columns claim.sql returns.
-- A key with NO row is one whose blocking row committed after this statement's snapshot (see claim.sql):
-- the caller claims it again on its own.
-- Rows are inserted in key order, so two batches that share keys lock them in the same order and cannot
-- deadlock each other; a single claim holds one key only. The order is byte order ("C"), as the column's.
WITH input AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::float8[]) AS i(key, fingerprint, lease_ms)
),
claimed AS (
  INSERT INTO {{table}} AS r (key, status, fingerprint, token, attempt, created_at, expires_at)
  SELECT key, 'in_progress', fingerprint, nextval('{{sequence}}'), 1, now(),
    now() + lease_ms * interval '1 millisecond'
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
    expires_at = excluded.expires_at
  WHERE r.expires_at <= now()
  RETURNING r.key, r.token, r.attempt, r.expires_at
),
blocking AS (
  -- The rows the INSERT found live are already locked by it, so FOR SHARE returns their newest version
  -- without waiting. Only the keys left unclaimed are looked up: usually none, and an empty array scans
  -- nothing, where filtering after the lookup probed the index and the heap once per key of the batch.
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
