-- complete-many: complete.sql for a batch of distinct keys in ONE statement, one transaction, one commit. Each
-- key is fenced on its own: only the in_progress record held by its token, with a live lease, becomes completed
-- (its recorded steps, migration 0005, are cleared, as by complete.sql).
-- $1 keys text[] (distinct), $2 tokens bigint[], $3 outcomes bytea[], $4 retentions in ms float8[].
-- Returns the keys that are completed by their token now (just completed, or already by this token):
-- a key that is absent was fenced out.
-- No join: each row finds its item by array_position($1, key), so the only way to the rows is the primary key
-- (key = ANY), and `(expires_at > now()) IS TRUE` keeps the expires_at index out of reach. A plan cached
-- once per connection (migration 0007) then reads the batch's keys by the primary key whatever the table's
-- statistics were when it was made; with a join, a plan made on a young table walked the expires_at index
-- over every live row and joined the batch to them (measured: 1,700 → 5,200 µs per key within minutes).
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
