-- postgres-claim: claim up to $1 unsent, available rows for $2 ms (the lease), in one short statement.
-- Placeholders: {{table}}. $1 limit integer, $2 lease milliseconds integer, $3 byte budget bigint|null,
-- $4 the largest payload the client can read, bigint.
-- Returns the claimed rows: row_id (text), message_id, topic, message_key, payload (NULL when over $4),
-- content_type, headers, attempts (including this one), created_at, unreadable (why, when over $4).
--
-- FOR UPDATE SKIP LOCKED: concurrent relays each lock a disjoint set of rows instead of queueing on the same
-- ones. Pushing available_at forward is the lease: the row locks end with this statement, so the publish
-- itself holds no transaction open, and no other relay claims the row until the lease has passed.
-- Every unsent row is a candidate (no "id > last seen"), so a row whose transaction commits late, with an
-- id lower than rows already published, is still picked up by the next claim.
--
-- The byte budget ($3, NULL for none): a row is claimed only while the payloads of the rows before it in
-- the batch total less than $3, so a claim reads less than $3 plus one payload (and always one row, however
-- large). The whole claimed batch comes back in one result, which the relay holds in memory (node-postgres
-- as hex text first, two characters a byte): 100 rows of 20 MB were gigabytes per claim. octet_length
-- reads the stored size, not the value. Candidates left out stay locked only until this statement ends.
--
-- A payload over $4 is not sent: node-postgres reads bytea as hex text, and past V8's string limit the
-- whole result failed after this statement had committed, its rows claimed for nothing, after every lease.
-- Such a row (committed before enqueue refused the size) is claimed, with the reason in last_error, and
-- comes back with that reason as `unreadable` (RETURNING sees the updated row): the relay fails it like a
-- refused publish, so onPublishFailed hears of it and it waits out the backoff.
WITH candidates AS (
  SELECT id, octet_length(payload) AS bytes
  FROM {{table}}
  WHERE sent_at IS NULL AND available_at <= now()
  ORDER BY id
  LIMIT $1
  FOR UPDATE SKIP LOCKED
), picked AS (
  -- FOR UPDATE cannot sit beside a window function, so the running total is taken here.
  SELECT id
  FROM (SELECT id, sum(bytes) OVER (ORDER BY id) - bytes AS before FROM candidates) AS running
  WHERE $3::bigint IS NULL OR before < $3::bigint
)
UPDATE {{table}} AS o
SET available_at = now() + $2 * interval '1 millisecond',
    attempts = o.attempts + 1,
    last_attempt_at = now(),
    last_error = CASE WHEN octet_length(o.payload) > $4::bigint
      THEN 'payload of ' || octet_length(o.payload) || ' bytes, over the ' || $4::bigint
        || ' bytes node-postgres can read (bytea arrives as hex text): the relay cannot publish it; '
        || 'move the data elsewhere and delete the row'
      ELSE o.last_error END
FROM picked
WHERE o.id = picked.id
RETURNING o.id::text AS row_id, o.message_id, o.topic, o.message_key,
  CASE WHEN octet_length(o.payload) <= $4::bigint THEN o.payload END AS payload, o.content_type,
  o.headers, o.attempts, o.created_at,
  CASE WHEN octet_length(o.payload) > $4::bigint THEN o.last_error END AS unreadable;
