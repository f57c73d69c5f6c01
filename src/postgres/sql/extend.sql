-- extend: push the lease of the in_progress record held by this token to now() + lease. reserved_until is
-- left as is: the key stays reserved until the later of the two, so an extension never shortens it.
-- $1 key text, $2 token bigint, $3 lease in ms (float8).
-- Returns: rowCount 1 when extended, 0 when fenced out (an expired lease counts as lost).
UPDATE {{table}}
SET expires_at = now() + $3::float8 * interval '1 millisecond'
WHERE key = $1 AND token = $2 AND status = 'in_progress' AND expires_at > now();
