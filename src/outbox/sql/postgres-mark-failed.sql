-- postgres-mark-failed: record a failed publish and make the row claimable again after the backoff.
-- Placeholders: {{table}}. $1 id bigint, $2 backoff milliseconds integer, $3 error text,
-- $4 attempts integer|null (the failed claim's: the row is left alone once another claim took it over).
-- Returns: nothing. The row is kept: unsent rows are never deleted.
UPDATE {{table}}
SET available_at = now() + $2 * interval '1 millisecond', last_error = $3
WHERE id = $1 AND sent_at IS NULL AND ($4::integer IS NULL OR attempts = $4::integer);
