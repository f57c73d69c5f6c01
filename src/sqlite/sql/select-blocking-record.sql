-- select-blocking-record: the record that keeps a claim with @fingerprint from taking the key, as
-- claim.sql judges it: the live record, or a dead lease still reserved for another fingerprint (its holder
-- crashed; see 0002_reservations_and_steps.sql). get() never sees the latter: it reads select-record.sql.
-- Params: @key TEXT, @fingerprint TEXT (the claim's), @now INTEGER (epoch ms, app clock).
-- Returns: zero or one row (status, fingerprint, token, attempt, created_at, expires_at, completed_at, outcome).
SELECT status, fingerprint, token, attempt, created_at, expires_at, completed_at, outcome
FROM "idempotency_records"
WHERE key = @key
  AND (
    expires_at > @now
    OR (status = 'in_progress' AND fingerprint <> @fingerprint AND reserved_until > @now)
  );
