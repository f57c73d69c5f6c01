-- load-steps: the step results recorded on the in_progress record held by this token, with a live lease
-- (the guard of save-step.sql): those its holder saved and those of the attempts of the same request it
-- took over (claim.sql keeps them).
-- $1 key text, $2 token bigint.
-- Returns zero rows when fenced out (other token, expired lease, completed, absent); else one row per step
-- (name text, value: base64 text), or a single row with a NULL name when the record has none.
-- The values stay base64, decoded by the store: for 3 steps of 64 KiB that loads in about half the time of
-- decode()-ing them to bytea here, whose hex wire format is larger and slower to parse.
-- Only steps whose '#' member is the record's fingerprint count (see save-step.sql): others are leftovers
-- of another request, which code older than migration 0005 took the row over from.
SELECT s.name, s.value
FROM {{table}} AS r
LEFT JOIN LATERAL jsonb_each_text(
  CASE WHEN r.steps ->> '#' = r.fingerprint THEN r.steps - '#' END
) AS s (name, value) ON true
WHERE r.key = $1 AND r.token = $2 AND r.status = 'in_progress' AND r.expires_at > now();
