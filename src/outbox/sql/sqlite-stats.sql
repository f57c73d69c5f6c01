-- sqlite-stats: backlog figures for monitoring.
-- Placeholders: {{table}}. Parameters: none.
-- Returns one row: unsent, failing, sent, max_attempts (of unsent rows, 0 when none), oldest_created_at
-- (epoch ms of the oldest unsent row, NULL when none).
SELECT
  coalesce(sum(sent_at IS NULL), 0) AS unsent,
  coalesce(sum(sent_at IS NULL AND last_error IS NOT NULL), 0) AS failing,
  coalesce(sum(sent_at IS NOT NULL), 0) AS sent,
  coalesce(max(CASE WHEN sent_at IS NULL THEN attempts END), 0) AS max_attempts,
  min(CASE WHEN sent_at IS NULL THEN created_at END) AS oldest_created_at
FROM {{table}};
