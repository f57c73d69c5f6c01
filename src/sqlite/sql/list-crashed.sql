-- list-crashed: one page of the crashed claims (Store.listCrashed): the in-progress rows whose lease has
-- ended (expires_at <= @now) while their reservation runs on (reserved_until > @now), the rows
-- inspect-record.sql shows as dead leases, with the same columns, in byte order of their keys.
-- No index serves the status and reservation filters (claims must not pay for an admin command): the
-- primary key is walked in key order from the page's start, past every other row, until the page is full.
-- The start is `key >= coalesce(@after, '') AND key IS NOT @after`, which is `key > @after` for a later
-- page and every key (the empty one included) for the first, and still a range on the primary key.
-- Params: @now INTEGER (epoch ms, app clock), @after TEXT (the previous page's last key) or NULL (the first
--         page), @limit INTEGER (rows: the store asks for one more than a page, to know whether one follows).
-- Returns: up to @limit rows (key, then the columns of inspect-record.sql).
SELECT key, status, fingerprint, token, attempt, created_at, expires_at, completed_at, outcome,
  reserved_until, steps
FROM "idempotency_records"
WHERE key >= coalesce(@after, '') AND key IS NOT @after
  AND status = 'in_progress' AND expires_at <= @now AND reserved_until > @now
ORDER BY key
LIMIT @limit;
