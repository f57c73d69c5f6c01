-- postgres-claim: claim up to $1 unsent, available rows for $2 ms (the lease), in one short statement.
-- Placeholders: {{table}}. $1 limit integer, $2 lease milliseconds integer.
-- Returns the claimed rows: row_id (text), message_id, topic, message_key, payload, content_type, headers,
-- attempts (including this one), created_at.
--
-- FOR UPDATE SKIP LOCKED: concurrent relays each lock a disjoint set of rows instead of queueing on the same
-- ones. Pushing available_at forward is the lease: the row locks end with this statement, so the publish
-- itself holds no transaction open, and no other relay claims the row until the lease has passed.
-- Every unsent row is a candidate (no "id > last seen"), so a row whose transaction commits late, with an
-- id lower than rows already published, is still picked up by the next claim.
WITH picked AS (
  SELECT id
  FROM {{table}}
  WHERE sent_at IS NULL AND available_at <= now()
  ORDER BY id
  LIMIT $1
  FOR UPDATE SKIP LOCKED
)
UPDATE {{table}} AS o
SET available_at = now() + $2 * interval '1 millisecond',
    attempts = o.attempts + 1,
    last_attempt_at = now()
FROM picked
WHERE o.id = picked.id
RETURNING o.id::text AS row_id, o.message_id, o.topic, o.message_key, o.payload, o.content_type,
  o.headers, o.attempts, o.created_at;
