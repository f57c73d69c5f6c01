-- release: delete the in_progress record held by this token while its lease is live (its reservation,
-- if any, goes with it: the key is free to any request).
-- $1 key text, $2 token bigint.
-- Returns: rowCount 1 when released, 0 when fenced out.
DELETE FROM {{table}}
WHERE key = $1 AND token = $2 AND status = 'in_progress' AND expires_at > now();
