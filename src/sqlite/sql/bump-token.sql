-- bump-token: remember the last token issued, so later claims of any key go above it.
-- Params: @token INTEGER (the token claim.sql just issued). Returns: nothing.
UPDATE "idempotency_records_meta" SET last_token = max(last_token, @token) WHERE id = 1;
