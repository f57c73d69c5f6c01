-- select-record: the live record of a key (dead rows are invisible, as if already purged, a dead lease
-- still reserved included: a claim reads select-blocking-record.sql instead).
-- Params: @key TEXT, @now INTEGER (epoch ms, app clock).
-- Returns: zero or one row (status, fingerprint, token, attempt, created_at, expires_at, completed_at, outcome).
SELECT status, fingerprint, token, attempt, created_at, expires_at, completed_at, outcome
FROM "idempotency_records"
WHERE key = @key AND expires_at > @now;
