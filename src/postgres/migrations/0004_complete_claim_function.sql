-- 0004_complete_claim_function: a batch of completions and a batch of claims in one call, one statement
-- and one commit.
-- Placeholders (validated, quoted identifiers filled in by migrate()): {{completeClaimFunction}},
-- {{claimManyFunction}}, {{completeManyFunction}}.
-- $n params: none. Returns: nothing.
--
-- Why: under load the engine holds, at any moment, some requests' completions and other requests' claims.
-- Sent apart they are two statements, and each statement costs PostgreSQL a fixed few hundred µs (parse
-- of the call, executor start, commit and its WAL flush, the round trip) on top of ~8 µs per key. This
-- function applies the completions (0003's complete-many), then the claims (0003's claim-many), in one
-- transaction: a claim of a key completed by the same call sees the completed record. Each item keeps the
-- single call's semantics; neither list is atomic as a whole, as with the two functions it calls.
--
-- Result: one row per completed key (`completed` true, the other columns null), then the rows of the
-- claim-many function (`completed` null). The store falls back to the two batch calls on a schema without
-- this function (not yet migrated).

CREATE FUNCTION {{completeClaimFunction}}(
  text[], bigint[], bytea[], float8[], -- completions: key, token, outcome, retention_ms
  text[], text[], float8[]             -- claims: key, fingerprint, lease_ms
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
  FROM {{claimManyFunction}}($5, $6, $7) AS m;
END
$fn$;
