-- claim: create the record, take over a dead one (expired lease or outcome; a dead lease reserved for
-- another fingerprint blocks like a live one), or return the record that blocks the key, in ONE statement
-- judged by the database clock (now()).
-- $1 key text, $2 fingerprint text, $3 lease in ms (float8), $4 reservation in ms (float8; 0 = none).
-- Returns one row: claimed boolean, then token (bigint text), attempt and expires_at_ms when claimed, or
-- every column of the blocking record (times as epoch ms) when not.
-- Returns NO row only when the blocking row was committed by another transaction after this statement's
-- snapshot (ON CONFLICT saw it, a snapshot read cannot): the caller runs the statement again. Under
-- REPEATABLE READ / SERIALIZABLE PostgreSQL raises 40001 instead, and the caller retries the transaction.
WITH claimed AS (
  INSERT INTO {{table}} AS r
    (key, status, fingerprint, token, attempt, created_at, expires_at, reserved_until)
  VALUES ($1, 'in_progress', $2, nextval('{{sequence}}'), 1, now(),
    now() + $3::float8 * interval '1 millisecond',
    CASE WHEN $4::float8 > $3::float8 THEN now() + $4::float8 * interval '1 millisecond' END)
  ON CONFLICT (key) DO UPDATE SET
    status = 'in_progress',
    fingerprint = excluded.fingerprint,
    -- excluded.token is a fresh nextval(), larger than any token issued before; GREATEST keeps the
    -- order even if the sequence were ever reset.
    token = GREATEST(r.token + 1, excluded.token),
    attempt = CASE WHEN r.status = 'in_progress' THEN r.attempt + 1 ELSE 1 END,
    created_at = CASE WHEN r.status = 'in_progress' THEN r.created_at ELSE excluded.created_at END,
    outcome = NULL,
    completed_at = NULL,
    expires_at = excluded.expires_at,
    reserved_until = excluded.reserved_until,
    -- The recorded steps (migration 0005) belong to the claim: the same request taking over its crashed
    -- lease resumes from them; another request, or a new claim of a completed key, starts with none (r.*
    -- is the row before this SET). A new row leaves steps out of the INSERT: NULL.
    steps = CASE WHEN r.status = 'in_progress' AND r.fingerprint = excluded.fingerprint THEN r.steps END
  -- The row is dead, and no other fingerprint's reservation holds it (reserved_until, migration 0005,
  -- is the end of a dead lease's reservation: NULL for none, and meaningless on a completed row).
  WHERE r.expires_at <= now()
    AND (r.status = 'completed' OR r.fingerprint = excluded.fingerprint
      OR r.reserved_until IS NULL OR r.reserved_until <= now())
  RETURNING r.token, r.attempt, r.expires_at
),
blocking AS (
  -- FOR SHARE follows the update chain: if the row visible to our snapshot was since taken over, we get
  -- the newest version, not a stale one. The one-time NOT EXISTS filter skips the scan when we claimed.
  SELECT r.* FROM {{table}} AS r
  WHERE r.key = $1 AND NOT EXISTS (SELECT 1 FROM claimed)
  FOR SHARE
)
-- date_part() is float8 arithmetic, cheaper than extract()'s numeric; exact to the millisecond but for
-- float rounding (at most 1 ms early), which no lease or retention notices.
SELECT true AS claimed, NULL::text AS status, NULL::text AS fingerprint, token, attempt,
  NULL::bytea AS outcome, NULL::float8 AS created_at_ms, NULL::float8 AS completed_at_ms,
  floor(date_part('epoch', expires_at) * 1000) AS expires_at_ms
FROM claimed
UNION ALL
SELECT false, status, fingerprint, token, attempt, outcome,
  floor(date_part('epoch', created_at) * 1000),
  floor(date_part('epoch', completed_at) * 1000),
  floor(date_part('epoch', expires_at) * 1000)
FROM blocking;
-- Keep the header above short: pg_stat_activity shows a statement's first 1 kB, which must name the table.
