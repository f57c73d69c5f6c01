-- 0006_batch_lock_timeout: a batch claim waits at most 100 ms for a row another transaction holds; the
-- store then claims the batch's keys one by one, at once, so only the held key keeps waiting.
-- Placeholders (validated, quoted identifiers filled in by migrate()): {{claimManyFunction}},
-- {{completeClaimFunction}}.
-- $n params: none. Returns: nothing.
--
-- Why: an INSERT … ON CONFLICT that meets a row inserted or updated by a transaction still running waits
-- for that transaction to end. postgresTransactional holds its claim until the user's COMMIT, however long
-- the handler takes; an engine batch that carries a duplicate of that key waited with it, and so did every
-- other key of the batch, requests of other callers that have nothing to do with it. Engine batches never
-- hold a row longer than their own statement (a few ms), so a wait past 100 ms means such a transaction (or
-- a database stalled for other reasons). lock_timeout then fails the statement with 55P03, which rolls the
-- whole statement back: nothing of the batch was applied. The store (src/postgres/batch.ts) sends the keys
-- again as single claims, concurrently on the pool: the free keys are claimed at once, and the held key's
-- claim, which had no timeout when this migration was written, waited for the COMMIT and then replayed (or
-- claimed, after a rollback). Since then the single claim is bounded too (`claim-bounded.sql`, the same
-- 100 ms, set by the statement itself: no migration): past it the held key is answered in progress, retry
-- after busyRetryAfterMs (src/postgres/held-key.ts). The others' delay is bounded by the timeout.
--
-- A function's SET clause applies while the function runs and restores the caller's value on exit, so
-- nothing else on the connection is affected. complete_claim calls claim_many, whose clause applies inside
-- it; complete_claim has its own so that its completions are bounded too (the store then sends the
-- completions and the claims apart). complete_many keeps waiting: it only touches rows its caller holds.
-- Code older than this migration does not expect 55P03 from these functions: in the rare batch that waits
-- past 100 ms it reports the store unavailable (503, a consumer retry) instead of waiting. Deploy the code
-- first, then migrate.

ALTER FUNCTION {{claimManyFunction}}(text[], text[], float8[], float8[]) SET lock_timeout = '100ms';

ALTER FUNCTION {{completeClaimFunction}}(
  text[], bigint[], bytea[], float8[], text[], text[], float8[], float8[]
) SET lock_timeout = '100ms';
