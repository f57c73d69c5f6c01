-- postgres-mark-sent: mark published rows as sent, by id (never "everything below a watermark").
-- Placeholders: {{table}}. $1 ids bigint[].
-- Returns: nothing (rowCount = rows newly marked).
UPDATE {{table}}
SET sent_at = now(), last_error = NULL
WHERE id = ANY($1::bigint[]) AND sent_at IS NULL;
