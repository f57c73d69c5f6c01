-- postgres-stats: backlog figures for monitoring.
-- Placeholders: {{table}}. $n params: none.
-- Returns one row: unsent, failing (unsent with an error recorded), sent (not yet purged), max_attempts
-- (of unsent rows, 0 when none), oldest_unsent_ms (age of the oldest unsent row, NULL when none).
SELECT
  count(*) FILTER (WHERE sent_at IS NULL)::int AS unsent,
  count(*) FILTER (WHERE sent_at IS NULL AND last_error IS NOT NULL)::int AS failing,
  count(*) FILTER (WHERE sent_at IS NOT NULL)::int AS sent,
  coalesce(max(attempts) FILTER (WHERE sent_at IS NULL), 0)::int AS max_attempts,
  (extract(epoch FROM now() - min(created_at) FILTER (WHERE sent_at IS NULL)) * 1000)::float8
    AS oldest_unsent_ms
FROM {{table}};
