-- sqlite-mark-failed: record a failed publish and make the row claimable again at @available_at.
-- Placeholders: {{table}}. Parameters: @id, @available_at (epoch ms), @error.
-- Returns: nothing. The row is kept: unsent rows are never deleted.
UPDATE {{table}}
SET available_at = @available_at, last_error = @error
WHERE id = @id AND sent_at IS NULL;
