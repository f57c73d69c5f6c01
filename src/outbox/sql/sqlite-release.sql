-- sqlite-release: hand a claimed row back unpublished (the relay is stopping): claimable again at @now.
-- Placeholders: {{table}}. Parameters: @id, @attempt (the claim's attempts), @now (epoch ms).
-- Returns: nothing (changes = 1 when handed back).
--
-- Fenced like a failure record: a row another claim took since (its lease ran out meanwhile) is left to
-- that claim. attempts stays counted (a claim counts one whatever happens next), so the fence only grows.
UPDATE {{table}}
SET available_at = @now
WHERE id = @id AND attempts = @attempt AND sent_at IS NULL;
