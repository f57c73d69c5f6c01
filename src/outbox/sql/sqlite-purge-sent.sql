-- sqlite-purge-sent: delete up to @limit rows sent before @before, oldest first.
-- Placeholders: {{table}}. Parameters: @before (epoch ms), @limit.
-- Returns: nothing (changes = rows deleted). Rows with sent_at NULL (unsent) are never touched.
DELETE FROM {{table}}
WHERE id IN (
  SELECT id FROM {{table}}
  WHERE sent_at IS NOT NULL AND sent_at < @before
  ORDER BY sent_at
  LIMIT @limit
);
