-- postgres-purge-sent: delete up to $2 rows sent more than $1 ms ago, oldest first.
-- Placeholders: {{table}}. $1 retention milliseconds integer, $2 limit integer.
-- Returns: nothing (rowCount = rows deleted). Rows with sent_at NULL (unsent) are never touched.
DELETE FROM {{table}}
WHERE id IN (
  SELECT id FROM {{table}}
  WHERE sent_at IS NOT NULL AND sent_at < now() - $1 * interval '1 millisecond'
  ORDER BY sent_at
  LIMIT $2
);
