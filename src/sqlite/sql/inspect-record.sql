-- inspect-record: the record of a key as an operator sees it (Store.inspect): the live record, or a dead
-- lease still reserved for its request (its holder crashed), which select-record.sql hides; with its
-- reservation and recorded steps. Dead, unreserved rows are left out, as if already purged.
-- Params: @key TEXT, @now INTEGER (epoch ms, app clock).
-- Returns: zero or one row (the columns of select-record.sql, then reserved_until and steps).
SELECT status, fingerprint, token, attempt, created_at, expires_at, completed_at, outcome,
  reserved_until, steps
FROM "idempotency_records"
WHERE key = @key
  AND (expires_at > @now OR (status = 'in_progress' AND reserved_until > @now));
