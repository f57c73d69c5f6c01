-- 0001_outbox (PostgreSQL): the outbox table, its indexes and the NOTIFY trigger that wakes relays.
-- Placeholders (validated, quoted identifiers filled in by migrateOutbox()): {{table}}, {{messageIdKey}},
-- {{pendingIndex}}, {{sentIndex}}, {{notifyFunction}}, {{notifyTrigger}}, {{channelLiteral}}.
-- $n params: none. Returns: nothing.
--
-- LOGGED on purpose: an unlogged table is truncated after a crash, which would lose committed messages.
CREATE TABLE {{table}} (
  -- Local insertion order only. Sequence values are handed out at INSERT, not at COMMIT, so a lower id can
  -- become visible after a higher one: relays never use it as a high-watermark, only to mark rows by id.
  id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- The stable message id every publish carries (AMQP message-id, Nats-Msg-Id, a stream field).
  message_id      text        NOT NULL,
  topic           text        NOT NULL,
  message_key     text,
  payload         bytea       NOT NULL,
  content_type    text        NOT NULL,
  headers         jsonb       NOT NULL DEFAULT '{}'::jsonb,
  created_at      timestamptz NOT NULL DEFAULT now(),
  -- Claimable from then on: pushed forward by a claim (the lease) and by a failed publish (the backoff).
  available_at    timestamptz NOT NULL DEFAULT now(),
  -- Publish attempts started (a claim counts one, so a relay crash mid-publish is counted too).
  attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  last_error      text,
  last_attempt_at timestamptz,
  -- NULL until the broker confirmed the publish. Only rows with sent_at set are ever purged.
  sent_at         timestamptz,
  CONSTRAINT {{messageIdKey}} UNIQUE (message_id)
);

-- Claims walk unsent rows in id order; the partial index stays as small as the backlog.
CREATE INDEX {{pendingIndex}} ON {{table}} (id) WHERE sent_at IS NULL;
-- Purge walks sent rows by age.
CREATE INDEX {{sentIndex}} ON {{table}} (sent_at) WHERE sent_at IS NOT NULL;

-- NOTIFY is delivered at COMMIT only (never for a rolled-back insert), once per transaction and channel.
CREATE FUNCTION {{notifyFunction}}() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  PERFORM pg_notify(TG_ARGV[0], '');
  RETURN NULL;
END
$fn$;

CREATE TRIGGER {{notifyTrigger}} AFTER INSERT ON {{table}}
  FOR EACH STATEMENT EXECUTE FUNCTION {{notifyFunction}}({{channelLiteral}});
