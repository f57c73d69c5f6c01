-- 0003_batch_functions: claim-many.sql and complete-many.sql as functions, so PostgreSQL parses them once
-- per connection instead of on every batch.
-- Placeholders (validated, quoted identifiers filled in by migrate()): {{table}}, {{sequence}},
-- {{claimManyFunction}}, {{completeManyFunction}}.
-- $n params: none. Returns: nothing.
--
-- Why functions: the store sends a batch as one statement with array parameters, and cannot keep it as a
-- prepared statement: after five runs PostgreSQL may switch a prepared statement to a generic plan,
-- costed with the statistics of that moment, and on a young table that plan joins the batch's keys by a
-- sequential scan, which then stays while the table grows (measured: 979 → 7,801 µs of PostgreSQL CPU per
-- key over four rounds). So each batch was parsed, analysed and planned anew. A PL/pgSQL function keeps
-- its statement parsed for the life of the connection, and `SET plan_cache_mode = force_custom_plan`
-- plans it with the batch's own arrays on every call, never generically; the store calls it through a
-- prepared `SELECT * FROM fn($1, …)`, whose own plan is a function scan whatever the statistics.
-- Measured (PostgreSQL backends' CPU, claim + complete on fresh keys, same run): 109–115 → 84–93 µs per
-- key at batches of 8, 31–32 → 27–28 µs at batches of 50.
--
-- The bodies are claim-many.sql and complete-many.sql as of this migration, with the same parameters and
-- the same result columns; `#variable_conflict use_column` makes a name such as `key` mean the column, as
-- in the statements. A later change to either statement comes with a migration that replaces its function.
-- The store falls back to the statements on a schema without these functions (not yet migrated).

CREATE FUNCTION {{claimManyFunction}}(text[], text[], float8[])
RETURNS TABLE (
  key text, claimed boolean, status text, fingerprint text, token bigint, attempt integer,
  outcome bytea, created_at_ms float8, completed_at_ms float8, expires_at_ms float8
)
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
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
END
$fn$;

CREATE FUNCTION {{completeManyFunction}}(text[], bigint[], bytea[], float8[])
RETURNS TABLE (key text)
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH input AS (
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::bytea[], $4::float8[])
      AS i(key, token, outcome, retention_ms)
  ),
  done AS (
    UPDATE {{table}} AS r
    SET status = 'completed', outcome = input.outcome, completed_at = now(),
      expires_at = now() + input.retention_ms * interval '1 millisecond'
    FROM input
    WHERE r.key = input.key AND r.token = input.token AND r.status = 'in_progress' AND r.expires_at > now()
    RETURNING r.key
  )
  SELECT key FROM done
  UNION ALL
  -- Keys the UPDATE did not complete may have been completed by this token already (a retried batch). Only
  -- those are looked up: the filter on input runs before the join, so the usual batch, all done, probes
  -- nothing (a filter on the joined row would probe the index and the heap once per key).
  SELECT r.key FROM input JOIN {{table}} AS r ON r.key = input.key AND r.token = input.token
  WHERE input.key NOT IN (SELECT key FROM done) AND r.status = 'completed' AND r.expires_at > now();
END
$fn$;
