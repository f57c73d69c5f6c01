-- delete-record: remove the record whatever its state (admin).
-- $1 key text.
-- Returns zero or one row: live boolean (whether the removed row was still live).
DELETE FROM {{table}} WHERE key = $1 RETURNING expires_at > now() AS live;
