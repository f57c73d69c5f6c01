-- 0005_reservations_and_steps: keep a crashed claim's key reserved for its fingerprint
-- (ClaimOptions.reserveMs), and record the results of an execution's steps on its claim (Store.saveStep /
-- loadSteps).
-- Placeholders (validated, quoted identifiers filled in by migrate()): {{table}}, {{sequence}},
-- {{claimManyFunction}}, {{completeManyFunction}}, {{completeClaimFunction}}.
-- $n params: none. Returns: nothing.
--
-- A claim made with reserveMs > leaseMs sets reserved_until = now() + reserveMs. Once the lease has ended
-- (the holder crashed), a claim with the same fingerprint takes the row over as before, but a claim with
-- another fingerprint gets the dead row back (a mismatch) until reserved_until has passed too. NULL means
-- no reservation beyond the lease (expires_at); so does a reserved_until earlier than expires_at (an
-- extended lease): the key is reserved until GREATEST(expires_at, reserved_until). The column means nothing
-- on a completed row, whose expires_at alone decides. purge never deletes a dead lease still reserved.
--
-- steps holds the step results recorded on an in_progress row: a jsonb object, step name → base64 of the
-- result's bytes, plus '#' → the fingerprint of the request that recorded them (save-step.sql). NULL means
-- none. The steps belong to the claim: a takeover by the same fingerprint keeps them (the request resumes
-- where its crashed attempt got to), a takeover by another fingerprint or of a completed row drops them
-- (the claim statements), a completion clears them (complete.sql, complete-many.sql), a release or a
-- delete removes the row. Only the holder (its token, a live lease) saves or loads them.
--
-- ADD COLUMN without a default only changes the catalog: the table is not rewritten, and the ACCESS
-- EXCLUSIVE lock is held for an instant. Existing rows read NULL (no reservation, no steps). Code older than
-- this migration keeps working on the migrated table: its statements do not name the columns, so the rows
-- it claims carry no reservation of their own, it ignores the reservations of others, and its takeovers
-- leave the steps of the previous request on the row (their '#' then differs from the row's fingerprint,
-- and they are neither returned nor kept by a later save: see save-step.sql).
--
-- The batch functions of 0003 and 0004 embed the claim statement and take the leases as float8[]; the
-- versions below take the reservations too (one more float8[]). A changed argument list is a new function,
-- so the old ones are dropped: older code then finds its functions missing (42883) and sends its batch
-- statements instead, as on a schema before 0003. complete_claim calls claim_many, so both go together.
-- The functions are new objects: under default privileges that revoke EXECUTE from PUBLIC, grant EXECUTE
-- on them to the serving role again. complete_many keeps its arguments and result, and only its body
-- changes (it clears the steps): CREATE OR REPLACE keeps the function, its owner and its grants, and
-- older code calling it gets the new body, which does what the old one did and also clears the steps.

ALTER TABLE {{table}} ADD COLUMN reserved_until timestamptz;
ALTER TABLE {{table}} ADD COLUMN steps jsonb;

DROP FUNCTION IF EXISTS {{completeClaimFunction}}(
  text[], bigint[], bytea[], float8[], text[], text[], float8[]
);
DROP FUNCTION IF EXISTS {{claimManyFunction}}(text[], text[], float8[]);

-- The body is claim-many.sql as of this migration, with the same parameters and result columns.
CREATE FUNCTION {{claimManyFunction}}(text[], text[], float8[], float8[])
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
      steps = CASE WHEN r.status = 'in_progress' AND r.fingerprint = excluded.fingerprint THEN r.steps END
    WHERE r.expires_at <= now()
      AND (r.status = 'completed' OR r.fingerprint = excluded.fingerprint
        OR r.reserved_until IS NULL OR r.reserved_until <= now())
    RETURNING r.key, r.token, r.attempt, r.expires_at
  ),
  blocking AS (
    -- The rows the INSERT found live (or reserved) are already locked by it, so FOR SHARE returns their
    -- newest version without waiting. Only the keys left unclaimed are looked up: usually none.
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

-- The body is complete-many.sql as of this migration (0003's, clearing the steps), same arguments and result.
CREATE OR REPLACE FUNCTION {{completeManyFunction}}(text[], bigint[], bytea[], float8[])
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
      expires_at = now() + input.retention_ms * interval '1 millisecond', steps = NULL
    FROM input
    WHERE r.key = input.key AND r.token = input.token AND r.status = 'in_progress' AND r.expires_at > now()
    RETURNING r.key
  )
  SELECT key FROM done
  UNION ALL
  -- Keys the UPDATE did not complete may have been completed by this token already (a retried batch).
  SELECT r.key FROM input JOIN {{table}} AS r ON r.key = input.key AND r.token = input.token
  WHERE input.key NOT IN (SELECT key FROM done) AND r.status = 'completed' AND r.expires_at > now();
END
$fn$;

-- 0004's function with the claims' reservations: completions (0003's complete-many), then the claims.
CREATE FUNCTION {{completeClaimFunction}}(
  text[], bigint[], bytea[], float8[], -- completions: key, token, outcome, retention_ms
  text[], text[], float8[], float8[]   -- claims: key, fingerprint, lease_ms, reserve_ms
)
RETURNS TABLE (
  completed boolean, key text, claimed boolean, status text, fingerprint text, token bigint,
  attempt integer, outcome bytea, created_at_ms float8, completed_at_ms float8, expires_at_ms float8
)
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
AS $fn$
BEGIN
  -- Two statements, in this order: the claims' statement takes its snapshot after the completions ran.
  RETURN QUERY
  SELECT true, c.key, NULL::boolean, NULL::text, NULL::text, NULL::bigint, NULL::integer, NULL::bytea,
    NULL::float8, NULL::float8, NULL::float8
  FROM {{completeManyFunction}}($1, $2, $3, $4) AS c;
  RETURN QUERY
  SELECT NULL::boolean, m.key, m.claimed, m.status, m.fingerprint, m.token, m.attempt, m.outcome,
    m.created_at_ms, m.completed_at_ms, m.expires_at_ms
  FROM {{claimManyFunction}}($5, $6, $7, $8) AS m;
END
$fn$;
