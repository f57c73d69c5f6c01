-- inspect: the record of a key as an operator sees it (Store.inspect): the live record, or a dead lease
-- still reserved for its request (its holder crashed), which get.sql hides; with its reservation, its
-- recorded steps and the database clock. Dead, unreserved rows are left out, as if already purged.
-- $1 key text.
-- Returns zero or one row: get.sql's columns, then reserved_until_ms (NULL for none), steps (jsonb, step
-- name → base64; NULL for none, and only those of the record's own request, as load-steps.sql reads them)
-- and now_ms (the database clock, which every time of the row is to be judged by).
SELECT status, fingerprint, token, attempt, outcome,
  floor(date_part('epoch', created_at) * 1000) AS created_at_ms,
  floor(date_part('epoch', completed_at) * 1000) AS completed_at_ms,
  floor(date_part('epoch', expires_at) * 1000) AS expires_at_ms,
  floor(date_part('epoch', reserved_until) * 1000) AS reserved_until_ms,
  CASE WHEN status = 'in_progress' AND steps ->> '#' = fingerprint THEN steps - '#' END AS steps,
  floor(date_part('epoch', now()) * 1000) AS now_ms
FROM {{table}}
WHERE key = $1
  AND (expires_at > now() OR (status = 'in_progress' AND reserved_until > now()));
