-- 0008_bounded_single_statements: the store's single-key statements as functions; claim and release carry a
-- 100 ms lock_timeout that bounds their wait for the records table's lock, not only for a row.
-- Placeholders (validated, quoted identifiers filled in by migrate()): {{table}}, {{sequence}},
-- {{claimOneFunction}}, {{completeOneFunction}}, {{extendOneFunction}}, {{releaseOneFunction}},
-- {{saveStepOneFunction}}.
-- $n params: none. Returns: nothing.
--
-- Why: claim-bounded.sql sets its 100 ms lock_timeout from inside the statement, which bounds the wait for a
-- row another transaction holds, but PostgreSQL takes the statement's lock on the table before running any
-- of it (while parsing it, or when a prepared statement's plan is checked). While a session held or awaited
-- a conflicting lock on the table (an ALTER TABLE, a LOCK TABLE, a VACUUM FULL, a REINDEX, a migration
-- queued behind a long transaction), every claim waited as long as it did, each on a pool connection of its
-- own: every request hung. A function's SET clause is in force before its body takes any lock, so a claim
-- or a release gives up after 100 ms with 55P03, nothing applied. The store tells the waits apart by what
-- they were for (src/postgres/held-key.ts): a claim that met a row another transaction holds is the key in
-- progress (409, retry after busyRetryAfterMs); anything else is the store unavailable (503 with
-- Retry-After, a consumer's redelivery later), and nothing has run. A release that gives up leaves the claim
-- to its lease: no second run either.
-- complete, extend and save-step are NOT bounded, on purpose: they come after the handler's effect. A
-- completion that gave up after 100 ms would be retried only while the lease lasts, then the record stays
-- in progress, its lease runs out behind the lock, and the retry runs the handler again: a second charge.
-- Unbounded, the statement waits in the lock queue ahead of any retry's claim and commits once the lock is
-- gone (now() is fixed when it starts, so a lease alive then still counts): a hang, never a duplicate. The
-- same holds for an extension (a lost lease mid-handler lets a takeover run beside it) and a step's result.
-- They are functions all the same so that every single-key call is planned once per connection, as a
-- primary-key lookup (the same settings as the claim's), and so that a later migration can change one
-- call's settings without another store change. complete_many keeps its own settings (0007).
--
-- Each body is its statement (claim.sql, extend.sql, release.sql, save-step.sql) as of this migration, as
-- it is, with the same parameters (a later change to one of them comes with a migration that replaces its
-- function); complete_one runs complete.sql's UPDATE, then, only if it changed nothing, complete.sql's
-- look-up of a completion by the same token (cheaper than complete.sql's one statement through RETURN
-- QUERY). claim_one returns claim.sql's row, the others whether a row was changed (the statement's row
-- count, or complete.sql's `ok`). Each is planned once per connection: a primary-key lookup whatever the
-- statistics, with enable_seqscan = off as for the batch functions (0007). The store calls them through
-- prepared `SELECT … FROM fn($1, …)` statements, which lock nothing of the table themselves, and falls back to
-- the statements on a schema without them (not yet migrated, or EXECUTE revoked from the serving role).
-- Measured against the prepared statements, one key at a time, 50 callers on 10 connections, same runs:
-- claims 3–5% fewer per second, completions about 3% fewer (through RETURN QUERY: 7%); claim + complete
-- pairs (bench/postgres.ts COMPARE, 9 rounds): 6,626 against 6,631 per second, 181.5 against 174.1 µs of
-- PostgreSQL CPU per pair. The engine's batches, which carry the load once two calls are in flight, are
-- unchanged.
-- An operator may choose another bound for claims with ALTER FUNCTION … SET lock_timeout, as for the batch
-- functions.
-- CREATE FUNCTION takes no lock on the table: this migration waits for no call in flight. Code older than
-- this migration never calls the new functions: either deploy order.

CREATE FUNCTION {{claimOneFunction}}(text, text, float8, float8)
RETURNS TABLE (
  claimed boolean, status text, fingerprint text, token bigint, attempt integer,
  outcome bytea, created_at_ms float8, completed_at_ms float8, expires_at_ms float8
)
LANGUAGE plpgsql
SET lock_timeout = '100ms'
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH claimed AS (
    INSERT INTO {{table}} AS r
      (key, status, fingerprint, token, attempt, created_at, expires_at, reserved_until)
    VALUES ($1, 'in_progress', $2, nextval('{{sequence}}'), 1, now(),
      now() + $3::float8 * interval '1 millisecond',
      CASE WHEN $4::float8 > $3::float8 THEN now() + $4::float8 * interval '1 millisecond' END)
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
    RETURNING r.token, r.attempt, r.expires_at
  ),
  blocking AS (
    SELECT r.* FROM {{table}} AS r
    WHERE r.key = $1 AND NOT EXISTS (SELECT 1 FROM claimed)
    FOR SHARE
  )
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
END
$fn$;

CREATE FUNCTION {{completeOneFunction}}(text, bigint, bytea, float8)
RETURNS boolean
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $fn$
BEGIN
  UPDATE {{table}}
  SET status = 'completed', outcome = $3, completed_at = now(),
    expires_at = now() + $4::float8 * interval '1 millisecond', steps = NULL
  WHERE key = $1 AND token = $2 AND status = 'in_progress' AND expires_at > now();
  IF FOUND THEN
    RETURN true;
  END IF;
  RETURN EXISTS (
    SELECT 1 FROM {{table}}
    WHERE key = $1 AND token = $2 AND status = 'completed' AND expires_at > now()
  );
END
$fn$;

CREATE FUNCTION {{extendOneFunction}}(text, bigint, float8)
RETURNS boolean
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $fn$
BEGIN
  UPDATE {{table}}
  SET expires_at = now() + $3::float8 * interval '1 millisecond'
  WHERE key = $1 AND token = $2 AND status = 'in_progress' AND expires_at > now();
  RETURN FOUND;
END
$fn$;

CREATE FUNCTION {{releaseOneFunction}}(text, bigint)
RETURNS boolean
LANGUAGE plpgsql
SET lock_timeout = '100ms'
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $fn$
BEGIN
  DELETE FROM {{table}}
  WHERE key = $1 AND token = $2 AND status = 'in_progress' AND expires_at > now();
  RETURN FOUND;
END
$fn$;

CREATE FUNCTION {{saveStepOneFunction}}(text, bigint, text, text)
RETURNS boolean
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $fn$
BEGIN
  UPDATE {{table}}
  SET steps = CASE WHEN steps ->> '#' = fingerprint THEN steps ELSE jsonb_build_object('#', fingerprint) END
    || jsonb_build_object($3::text, $4::text)
  WHERE key = $1 AND token = $2 AND status = 'in_progress' AND expires_at > now();
  RETURN FOUND;
END
$fn$;

