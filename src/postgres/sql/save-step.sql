-- save-step: record a step's result on the in_progress record held by this token, with a live lease (the
-- guard of complete.sql and extend.sql), replacing an earlier result of that name, in ONE statement.
-- $1 key text, $2 token bigint, $3 step name text ([A-Za-z0-9._:-]{1,100}, checked by the store),
-- $4 the result's bytes in base64 (text).
-- Returns: rowCount 1 when recorded, 0 when fenced out (other token, expired lease, completed, absent).
--
-- steps (migration 0005) is a jsonb object: step name → base64 of the result, plus the member '#' (never a
-- step name) holding the fingerprint of the request that recorded them. claim.sql keeps steps across a
-- takeover by the same fingerprint only, but code older than 0005 still serving on a migrated table takes
-- rows over without touching the column: the '#' tells such leftovers apart. Steps of another fingerprint
-- are replaced here, and load-steps.sql does not return them.
-- jsonb is immutable: || builds a new object, and the row (with it) is written anew, as any UPDATE does.
UPDATE {{table}}
SET steps = CASE WHEN steps ->> '#' = fingerprint THEN steps ELSE jsonb_build_object('#', fingerprint) END
  || jsonb_build_object($3::text, $4::text)
WHERE key = $1 AND token = $2 AND status = 'in_progress' AND expires_at > now();
