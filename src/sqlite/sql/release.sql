-- release: delete the in-progress record held by @token, with a live lease (its reservation and its
-- recorded steps go with it: the key is free to any request, and the next claim starts with no steps).
-- Params: @key TEXT, @token INTEGER, @now INTEGER (epoch ms). Returns: changes = 1 when released, else 0.
DELETE FROM "idempotency_records"
WHERE key = @key AND status = 'in_progress' AND token = @token AND expires_at > @now;
