-- postgres-enqueue: insert one message inside the caller's transaction.
-- Placeholders: {{table}}.
-- $1 message_id text, $2 topic text, $3 message_key text|null, $4 payload bytea, $5 content_type text,
-- $6 headers jsonb, $7 skip_guard boolean (true when the caller turned verifyTransaction off).
-- Returns one row: in_transaction (false when the statement ran in autocommit: nothing was inserted),
-- id (text, NULL when message_id already existed).
--
-- enqueue() first runs `SET LOCAL idempotency_kit.outbox_in_transaction = 'on'` (see postgres-outbox.ts). In a
-- transaction block that lasts until COMMIT/ROLLBACK; in autocommit PostgreSQL ignores SET LOCAL (with a
-- warning), so the setting is unset here and the guard refuses to insert a message that would otherwise
-- commit on its own, apart from the business writes. With verifyTransaction: false the guard gets true.
WITH guard AS (
  SELECT $7::boolean
    OR coalesce(current_setting('idempotency_kit.outbox_in_transaction', true), '') = 'on'
    AS in_transaction
), inserted AS (
  INSERT INTO {{table}} (message_id, topic, message_key, payload, content_type, headers)
  SELECT $1, $2, $3, $4, $5, $6::jsonb FROM guard WHERE guard.in_transaction
  ON CONFLICT (message_id) DO NOTHING
  RETURNING id
)
SELECT guard.in_transaction, inserted.id::text AS id FROM guard LEFT JOIN inserted ON true;
