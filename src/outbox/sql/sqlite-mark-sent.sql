-- sqlite-mark-sent: mark published rows as sent, by id (never "everything below a watermark").
-- Placeholders: {{table}}. Parameters: @ids (JSON array of row ids, as integers:
-- json_each reads them as exact 64-bit values), @now (epoch ms).
-- Returns: nothing (changes = rows newly marked).
UPDATE {{table}}
SET sent_at = @now, last_error = NULL
WHERE id IN (SELECT value FROM json_each(@ids)) AND sent_at IS NULL;
