-- 0001_records: the records table, its token sequence and the index purge walks.
-- Placeholders (validated, quoted identifiers filled in by migrate()): {{table}}, {{sequence}}, {{expiresIndex}}.
-- $n params: none. Returns: nothing.
--
-- The table is LOGGED on purpose (never UNLOGGED): an unlogged table is truncated after a crash and is not
-- replicated, so a restart or a failover would forget every key and let duplicates execute.
CREATE TABLE {{table}} (
  -- Storage key: SHA-256 hex of (namespace, scope, key); a raw client key is never stored.
  key          text        PRIMARY KEY,
  status       text        NOT NULL CHECK (status IN ('in_progress', 'completed')),
  fingerprint  text        NOT NULL,
  -- Fencing token, from {{sequence}}: strictly increasing per key over its whole history.
  token        bigint      NOT NULL CHECK (token > 0),
  attempt      integer     NOT NULL CHECK (attempt > 0),
  outcome      bytea,
  created_at   timestamptz NOT NULL,
  completed_at timestamptz,
  -- End of the lease (in_progress) or of the retention (completed): the row is dead from then on.
  expires_at   timestamptz NOT NULL,
  CHECK ((status = 'completed') = (outcome IS NOT NULL AND completed_at IS NOT NULL))
)
-- Every row is updated at least once (claim -> completed): free space on each page lets the new row
-- version stay on the same page instead of extending the table, which measurably raises throughput.
WITH (fillfactor = 70);

-- Tokens stay JavaScript safe integers; CACHE 1 keeps nextval() monotonic across sessions.
CREATE SEQUENCE {{sequence}} AS bigint MINVALUE 1 MAXVALUE 9007199254740991 CACHE 1;

-- purgeExpired() and stats() walk dead rows in expires_at order.
CREATE INDEX {{expiresIndex}} ON {{table}} (expires_at);
