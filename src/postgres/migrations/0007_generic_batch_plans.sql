-- 0007_generic_batch_plans: the batch functions plan their statements once per connection, not on every call.
-- Placeholders (validated, quoted identifiers filled in by migrate()): {{table}}, {{claimManyFunction}},
-- {{completeManyFunction}}, {{completeClaimFunction}}.
-- $n params: none. Returns: nothing.
--
-- Why: 0003 made the functions plan every call (force_custom_plan), because a plan cached while the table
-- was young could join a batch to the table the wrong way and keep doing so as the table grew. Planning
-- the claim and the completion statements costs PostgreSQL about 130 µs each per call, the larger part of
-- a small batch's cost. Here each statement is shaped so that the table can only be read by the primary
-- key, and the functions keep one plan per connection (force_generic_plan):
-- - claim_many's statement reads the table only through ON CONFLICT (the primary key) and `key = ANY`;
--   its body stays 0005's;
-- - complete_many's statement (complete-many.sql as of this migration) no longer joins the batch to the
--   table: each row finds its item with array_position, and `(expires_at > now()) IS TRUE` cannot use the
--   expires_at index, so `key = ANY` on the primary key is the only index path;
-- - `enable_seqscan = off` rules out reading the whole table, whatever the statistics say.
-- Measured (PostgreSQL backend's CPU, complete_claim of fresh keys from an empty table, same run): 95 → 48–54
-- µs per key at batches of 8, 34–37 → 22–28 µs at batches of 32; no growth as the table grows. With
-- complete_many's 0005 body the cached plan read the expires_at index over every live row: 1,700 →
-- 5,200 µs per key within minutes, which is why the body changes too.
--
-- ALTER FUNCTION … SET changes only the settings it names: claim_many and complete_claim keep their
-- lock_timeout (0006, or an operator's own), their owner and grants. complete_many keeps its arguments and
-- result, so CREATE OR REPLACE keeps its owner and grants; its settings are the ones below (0003's
-- plan_cache_mode was its only one). Code older than this migration calls the same functions with the same
-- arguments and gets the same results.

ALTER FUNCTION {{claimManyFunction}}(text[], text[], float8[], float8[])
  SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION {{claimManyFunction}}(text[], text[], float8[], float8[]) SET enable_seqscan = off;

-- complete_claim's own statements only call the two functions above.
ALTER FUNCTION {{completeClaimFunction}}(
  text[], bigint[], bytea[], float8[], text[], text[], float8[], float8[]
) SET plan_cache_mode = force_generic_plan;

-- The body is complete-many.sql as of this migration, same arguments and result.
CREATE OR REPLACE FUNCTION {{completeManyFunction}}(text[], bigint[], bytea[], float8[])
RETURNS TABLE (key text)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH done AS (
    UPDATE {{table}} AS r
    SET status = 'completed', completed_at = now(), outcome = ($3::bytea[])[array_position($1::text[], r.key)],
      expires_at = now() + ($4::float8[])[array_position($1::text[], r.key)] * interval '1 millisecond', steps = NULL
    WHERE r.key = ANY ($1::text[]) AND r.token = ($2::bigint[])[array_position($1::text[], r.key)]
      AND r.status = 'in_progress' AND (r.expires_at > now()) IS TRUE
    RETURNING r.key
  )
  SELECT key FROM done
  UNION ALL
  -- Keys the UPDATE did not complete may have been completed by this token already (a retried batch). Only
  -- those are looked up: the usual batch, all done, looks up nothing.
  SELECT r.key FROM {{table}} AS r
  WHERE r.key = ANY (ARRAY(SELECT unnest($1::text[]) EXCEPT SELECT key FROM done))
    AND r.token = ($2::bigint[])[array_position($1::text[], r.key)] AND r.status = 'completed'
    AND (r.expires_at > now()) IS TRUE;
END
$fn$;
