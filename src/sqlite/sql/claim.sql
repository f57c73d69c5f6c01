-- claim: create the record if absent, or take over a dead one (expired lease or expired retention);
-- leave a live record alone. The rules of applyClaim() in src/core/record.ts, in one statement:
-- token = max(previous token + 1, last token issued + 1, now in µs); a takeover of an in-progress record
-- keeps created_at and adds 1 to attempt, anything else starts at attempt 1.
-- Params: @key TEXT, @fingerprint TEXT, @now INTEGER (epoch ms, app clock), @now_micros INTEGER (now × 1000),
--         @lease_until INTEGER (epoch ms).
-- Returns: one row (token, attempt, lease_until) when this call claimed the key; no row when a live record
--          blocks it.
-- Must run in the same BEGIN IMMEDIATE transaction as bump-token.sql, which records the token issued.
INSERT INTO "idempotency_records"
  (key, status, fingerprint, token, attempt, created_at, expires_at, completed_at, outcome)
VALUES (
  @key, 'in_progress', @fingerprint,
  (SELECT max(last_token + 1, @now_micros) FROM "idempotency_records_meta" WHERE id = 1),
  1, @now, @lease_until, NULL, NULL
)
ON CONFLICT (key) DO UPDATE SET
  token        = max(token + 1, excluded.token),
  attempt      = CASE WHEN status = 'in_progress' THEN attempt + 1 ELSE 1 END,
  created_at   = CASE WHEN status = 'in_progress' THEN created_at ELSE excluded.created_at END,
  status       = 'in_progress',
  fingerprint  = excluded.fingerprint,
  expires_at   = excluded.expires_at,
  completed_at = NULL,
  outcome      = NULL
WHERE expires_at <= excluded.created_at
RETURNING token, attempt, expires_at AS lease_until;
