-- 0001_records: the records table, its purge index, and the one-row token counter.
-- Params: none. Returns: nothing.
-- Run by migrate() inside a BEGIN IMMEDIATE transaction, once per table (recorded in
-- "idempotency_records_migrations"). "idempotency_records" is replaced by the configured table name.
--
-- One row per storage key. `expires_at` is the instant the row stops existing for the store:
-- the lease end while status = 'in_progress', the retention end once 'completed'. One column for both
-- keeps claim, get and purge on a single index.
CREATE TABLE "idempotency_records" (
  key          TEXT    NOT NULL PRIMARY KEY,
  status       TEXT    NOT NULL CHECK (status IN ('in_progress', 'completed')),
  fingerprint  TEXT    NOT NULL,
  token        INTEGER NOT NULL,
  attempt      INTEGER NOT NULL,
  created_at   INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL,
  completed_at INTEGER,
  outcome      BLOB
);

-- purgeExpired() walks dead rows oldest first, in bounded batches.
CREATE INDEX "idempotency_records_expires_at" ON "idempotency_records" (expires_at);

-- The last fencing token issued for this table. Claims read and raise it in the same IMMEDIATE
-- transaction, so tokens keep increasing per key even after a release, an expiry or a purge removed the
-- previous record, and even if the clock steps back.
CREATE TABLE "idempotency_records_meta" (
  id         INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
  last_token INTEGER NOT NULL
);
INSERT INTO "idempotency_records_meta" (id, last_token) VALUES (1, 0);
