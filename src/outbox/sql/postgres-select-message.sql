-- postgres-select-message: the row holding a message id (to compare a duplicate enqueue with it).
-- Placeholders: {{table}}. $1 message_id text.
-- Returns zero or one row: id (text), topic, message_key, payload, content_type.
SELECT id::text AS id, topic, message_key, payload, content_type
FROM {{table}}
WHERE message_id = $1;
