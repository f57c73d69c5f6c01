-- get: the live record for a key (a dead row, not yet purged, counts as absent).
-- $1 key text.
-- Returns zero or one row with the record's columns (times as epoch ms, token as bigint text).
SELECT status, fingerprint, token, attempt, outcome,
  floor(date_part('epoch', created_at) * 1000) AS created_at_ms,
  floor(date_part('epoch', completed_at) * 1000) AS completed_at_ms,
  floor(date_part('epoch', expires_at) * 1000) AS expires_at_ms
FROM {{table}}
WHERE key = $1 AND expires_at > now();
