-- sqlite-enqueue: insert one message inside the caller's transaction.
-- Placeholders: {{table}}.
-- Parameters: @message_id, @topic, @message_key (or NULL), @payload (BLOB), @content_type, @headers (JSON
-- text), @now (epoch ms).
-- Returns one row { id } when inserted, no row when message_id already existed. The id comes back as text:
-- read as a JavaScript number, an id past 2^53 would round to a neighbouring row's.
INSERT INTO {{table}} (message_id, topic, message_key, payload, content_type, headers, created_at,
  available_at)
VALUES (@message_id, @topic, @message_key, @payload, @content_type, @headers, @now, @now)
ON CONFLICT (message_id) DO NOTHING
RETURNING CAST(id AS TEXT) AS id;
