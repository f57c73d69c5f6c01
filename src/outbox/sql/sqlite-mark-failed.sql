-- sqlite-mark-failed: record a failed publish and make the row claimable again at @available_at.
-- Placeholders: {{table}}. Parameters: @id, @available_at (epoch ms), @error, @attempt (the failed claim's
-- attempts, or NULL: the row is left alone once another claim took it over).
-- Returns: nothing. The row is kept: unsent rows are never deleted.
UPDATE {{table}}
SET available_at = @available_at, last_error = @error
WHERE id = @id AND sent_at IS NULL AND (@attempt IS NULL OR attempts = @attempt);
