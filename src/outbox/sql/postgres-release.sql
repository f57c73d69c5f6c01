-- postgres-release: hand claimed rows back unpublished (the relay is stopping): claimable again at once.
-- Placeholders: {{table}}. $1 ids bigint[], $2 attempts integer[] (each row's claim, same order).
-- Returns: nothing (rowCount = rows handed back).
--
-- Fenced like a failure record: a row another claim took since (its lease ran out meanwhile) is left to
-- that claim. attempts stays counted (a claim counts one whatever happens next), so the fence only grows.
UPDATE {{table}} AS o
SET available_at = now()
FROM unnest($1::bigint[], $2::integer[]) AS r(id, attempts)
WHERE o.id = r.id AND o.attempts = r.attempts AND o.sent_at IS NULL;
