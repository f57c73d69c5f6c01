-- sqlite-select-message: the row holding a message id (to compare a duplicate enqueue with it).
-- Placeholders: {{table}}. Parameters: @message_id.
-- Returns zero or one row: id (text, exact past 2^53), topic, message_key, payload, content_type.
SELECT CAST(id AS TEXT) AS id, topic, message_key, payload, content_type
FROM {{table}}
WHERE message_id = @message_id;
