-- select-blocking-record: the record that keeps a claim with @fingerprint from taking the key, as
-- claim.sql judges it: the live record, or a dead lease still reserved for another fingerprint (its holder
-- crashed; see 0002_reservations_and_steps.sql). get() never sees the latter: it reads select-record.sql.
-- The claim's fingerprint is the row's when it is @fingerprint (the stored form) or @legacy_fingerprint (as
-- releases before that form bound it), as in claim.sql.
-- Params: @key TEXT, @fingerprint TEXT (the claim's, stored form), @legacy_fingerprint TEXT (as given),
--         @now INTEGER (epoch ms, app clock).
-- Returns: zero or one row (status, fingerprint, token, attempt, created_at, expires_at, completed_at,
--          outcome, then own_fingerprint: 1 when the row's fingerprint is the claim's, else 0).
SELECT status, fingerprint, token, attempt, created_at, expires_at, completed_at, outcome,
  fingerprint IN (@fingerprint, @legacy_fingerprint) AS own_fingerprint
FROM "idempotency_records"
WHERE key = @key
  AND (
    expires_at > @now
    OR (
      status = 'in_progress'
      AND fingerprint NOT IN (@fingerprint, @legacy_fingerprint)
      AND reserved_until > @now
    )
  );
