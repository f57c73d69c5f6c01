-- claim: create the record if absent, or take over a dead one (expired retention; or expired lease, if
-- this claim has the record's fingerprint or the record's reservation has ended too); leave a live record,
-- and a dead lease still reserved for another fingerprint, alone. The rules of applyClaim() in
-- src/core/record.ts, in one statement:
-- token = max(previous token + 1, last token issued + 1, now in µs); a takeover of an in-progress record
-- keeps created_at and adds 1 to attempt, anything else starts at attempt 1. The reservation of the row is
-- replaced by this claim's (@reserved_until, NULL for none), a same-fingerprint takeover included. The
-- recorded steps are kept by a takeover of an in-progress record with the same fingerprint (the same
-- request resumes where its crashed attempt got to), and dropped by anything else (a new row starts
-- without: steps is left out of the INSERT, so NULL).
-- "The same fingerprint" is the stored form (@fingerprint) or the request's fingerprint as releases before
-- that form bound it (@legacy_fingerprint): the same text unless it holds a lone surrogate, which is stored
-- as a digest (src/core/stored-fingerprint.ts) and was bound before as its WTF-8 bytes, so that a crashed
-- claim an earlier release wrote is still taken over by its own request (and the row gets the digest).
-- Params: @key TEXT, @fingerprint TEXT (stored form), @legacy_fingerprint TEXT (as given), @now INTEGER
--         (epoch ms, app clock), @now_micros INTEGER (now × 1000),
--         @lease_until INTEGER (epoch ms), @reserved_until INTEGER (epoch ms, now + reserveMs) or NULL
--         (reserveMs not above leaseMs: nothing reserved beyond the lease).
-- Returns: one row (token, attempt, lease_until) when this call claimed the key; no row when a live record,
--          or a dead lease reserved for another fingerprint, blocks it (select-blocking-record.sql reads it).
-- Must run in the same BEGIN IMMEDIATE transaction as bump-token.sql, which records the token issued.
INSERT INTO "idempotency_records"
  (key, status, fingerprint, token, attempt, created_at, expires_at, completed_at, outcome, reserved_until)
VALUES (
  @key, 'in_progress', @fingerprint,
  (SELECT max(last_token + 1, @now_micros) FROM "idempotency_records_meta" WHERE id = 1),
  1, @now, @lease_until, NULL, NULL, @reserved_until
)
ON CONFLICT (key) DO UPDATE SET
  token          = max(token + 1, excluded.token),
  attempt        = CASE WHEN status = 'in_progress' THEN attempt + 1 ELSE 1 END,
  created_at     = CASE WHEN status = 'in_progress' THEN created_at ELSE excluded.created_at END,
  status         = 'in_progress',
  fingerprint    = excluded.fingerprint,
  expires_at     = excluded.expires_at,
  completed_at   = NULL,
  outcome        = NULL,
  reserved_until = excluded.reserved_until,
  steps          = CASE
                     WHEN status = 'in_progress'
                       AND fingerprint IN (excluded.fingerprint, @legacy_fingerprint) THEN steps
                   END
-- Unqualified columns are the existing row's, as they were before this SET: every expression reads the old
-- row (the steps CASE compares the old fingerprint, not the one assigned above). reserved_until and steps
-- mean nothing on a completed row (a process running the statements of before 0002 completes without
-- clearing them).
WHERE expires_at <= excluded.created_at
  AND (
    status = 'completed'
    OR fingerprint IN (excluded.fingerprint, @legacy_fingerprint)
    OR reserved_until IS NULL
    OR reserved_until <= excluded.created_at
  )
RETURNING token, attempt, expires_at AS lease_until;
