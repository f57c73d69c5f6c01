-- sqlite-claim: claim up to @limit unsent, available rows until @lease_until (the lease).
-- Placeholders: {{table}}. Parameters: @now (epoch ms), @lease_until (epoch ms), @limit, @max_bytes (the
-- byte budget, NULL for none: a row is claimed only while the payloads of the rows before it in the batch
-- total less than it, so a claim reads less than @max_bytes plus one payload, and always one row; length()
-- of a BLOB reads its stored size, not its content).
-- Returns the claimed rows: row_id (text), message_id, topic, message_key, payload, content_type, headers, attempts
-- (including this one), created_at.
-- Run inside BEGIN IMMEDIATE: the write lock is taken first, so two relays (processes) never claim the same
-- row. Every unsent row is a candidate (no watermark), whatever order the transactions committed in.
UPDATE {{table}}
SET available_at = @lease_until, attempts = attempts + 1, last_attempt_at = @now
WHERE id IN (
  SELECT id FROM (
    SELECT id, sum(bytes) OVER (ORDER BY id) - bytes AS before
    FROM (
      SELECT id, length(payload) AS bytes FROM {{table}}
      WHERE sent_at IS NULL AND available_at <= @now
      ORDER BY id
      LIMIT @limit
    )
  )
  WHERE @max_bytes IS NULL OR before < @max_bytes
)
-- row_id as text, as PostgreSQL's: a JavaScript number past 2^53 rounds to a neighbouring row's id.
RETURNING CAST(id AS TEXT) AS row_id, message_id, topic, message_key, payload, content_type, headers, attempts,
  created_at;
