-- claim-bounded: claim.sql for the store's claim sent alone, in a transaction of its own (autocommit),
-- waiting at most 100 ms for a row another transaction holds, then failing with 55P03, nothing applied.
-- $1 key text, $2 fingerprint text, $3 lease in ms (float8), $4 reservation in ms (float8; 0 = none).
-- Returns what claim.sql returns (no row: run it again). Never run it in a transaction of your own: the
-- timeout would last until that transaction ends (see the end of this file).
WITH bounded AS MATERIALIZED (
  SELECT set_config('lock_timeout', '100ms', true)
),
claimed AS (
  INSERT INTO {{table}} AS r
    (key, status, fingerprint, token, attempt, created_at, expires_at, reserved_until)
  SELECT $1, 'in_progress', $2, nextval('{{sequence}}'), 1, now(),
    now() + $3::float8 * interval '1 millisecond',
    CASE WHEN $4::float8 > $3::float8 THEN now() + $4::float8 * interval '1 millisecond' END
  -- The INSERT's row is read from `bounded`, so the timeout is set before any wait can begin (PostgreSQL
  -- reads lock_timeout when a lock wait starts).
  FROM bounded
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
--
-- Why: an INSERT … ON CONFLICT that meets a row inserted or updated by a transaction still running waits for
-- that transaction to end, and postgresTransactional holds its claim until the user's COMMIT. Unbounded, each
-- retry of a long transaction's request held one more pool connection until then, and enough of them used
-- up the pool. Engine statements hold a row for a few ms, so 100 ms (as migration 0006 gives the batch
-- functions) means such a transaction, or a stalled database: the store answers the key in progress, retry
-- after busyRetryAfterMs (src/postgres/held-key.ts).
-- set_config(…, true) is SET LOCAL: in an autocommit statement it ends with the statement, and a statement
-- that failed rolled it back anyway; the connection's own setting is never touched. Inside an explicit
-- transaction it would stay until that transaction ends, and a timeout would abort it: the transactional
-- mode therefore claims with claim.sql, under its own lockTimeoutMs.
-- The timeout bounds the wait for a row only: PostgreSQL locks the table before the statement runs (while
-- parsing it, or checking a prepared statement's plan), so a session holding the table (an ALTER TABLE, a
-- LOCK TABLE, a VACUUM FULL) held up every claim until it let go. Migration 0008's claim_one runs this claim
-- under a function's SET clause, in force before any lock, and the store sends it there; this statement is
-- the fallback for a schema without it.
