-- 0001_outbox (SQLite): the outbox table and its indexes.
-- Placeholders (validated, quoted identifiers filled in by migrateOutbox()): {{table}}, {{pendingIndex}},
-- {{sentIndex}}. Parameters: none. Returns: nothing.
-- Times are epoch milliseconds from the application's clock (SQLite has no server clock).
CREATE TABLE {{table}} (
  -- AUTOINCREMENT: an id is never reused after a purge. Used to mark rows by id, never as a watermark.
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  -- The stable message id every publish carries.
  message_id      TEXT    NOT NULL UNIQUE,
  topic           TEXT    NOT NULL,
  message_key     TEXT,
  payload         BLOB    NOT NULL,
  content_type    TEXT    NOT NULL,
  headers         TEXT    NOT NULL DEFAULT '{}',
  created_at      INTEGER NOT NULL,
  -- Claimable from then on: pushed forward by a claim (the lease) and by a failed publish (the backoff).
  available_at    INTEGER NOT NULL,
  attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  last_error      TEXT,
  last_attempt_at INTEGER,
  -- NULL until the publisher confirmed. Only rows with sent_at set are ever purged.
  sent_at         INTEGER
) STRICT;

CREATE INDEX {{pendingIndex}} ON {{table}} (id) WHERE sent_at IS NULL;
CREATE INDEX {{sentIndex}} ON {{table}} (sent_at) WHERE sent_at IS NOT NULL;
