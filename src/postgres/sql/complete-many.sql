-- complete-many: complete.sql for a batch of distinct keys in ONE statement, one transaction, one commit. Each
-- key is fenced on its own: only the in_progress record held by its token, with a live lease, becomes completed
-- (its recorded steps, migration 0005, are cleared, as by complete.sql).
-- $1 keys text[] (distinct), $2 tokens bigint[], $3 outcomes bytea[], $4 retentions in ms float8[].
-- Returns the keys that are completed by their token now (just completed, or already by this token):
-- a key that is absent was fenced out.
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
-- Keys the UPDATE did not complete may have been completed by this token already (a retried batch). Only
-- those are looked up: the filter on input runs before the join, so the usual batch, all done, probes
-- nothing (a filter on the joined row would probe the index and the heap once per key).
SELECT r.key FROM input JOIN {{table}} AS r ON r.key = input.key AND r.token = input.token
WHERE input.key NOT IN (SELECT key FROM done) AND r.status = 'completed' AND r.expires_at > now();
