-- list-crashed: one page of the crashed claims (Store.listCrashed): in_progress rows whose lease has ended
-- while their reservation (migration 0005) runs on, as inspect.sql shows them, in byte order of the key.
-- $1 after text (the previous page's last key) or NULL (the first page), $2 rows (integer: the store asks
-- for one more than a page, to know whether one follows).
-- Returns up to $2 rows: key, then inspect.sql's columns (now_ms the same in every row: one statement).
-- No index serves the status and reservation filters, on purpose (claims must not pay for an admin read):
-- the primary key ("C" order, migration 0002) is walked from the page's start past every other row, or
-- the planner reads the dead rows by the expires_at index and sorts them. `key >= coalesce($1, '') AND
-- key IS DISTINCT FROM $1` is `key > $1` for a later page and every key (the empty one too) for the first,
-- and still a range on the primary key.
SELECT key, status, fingerprint, token, attempt, outcome,
  floor(date_part('epoch', created_at) * 1000) AS created_at_ms,
  floor(date_part('epoch', completed_at) * 1000) AS completed_at_ms,
  floor(date_part('epoch', expires_at) * 1000) AS expires_at_ms,
  floor(date_part('epoch', reserved_until) * 1000) AS reserved_until_ms,
  CASE WHEN steps ->> '#' = fingerprint THEN steps - '#' END AS steps,
  floor(date_part('epoch', now()) * 1000) AS now_ms
FROM {{table}}
WHERE key >= coalesce($1::text, '') AND key IS DISTINCT FROM $1::text
  AND status = 'in_progress' AND expires_at <= now() AND reserved_until > now()
ORDER BY key COLLATE "C"
LIMIT $2;
