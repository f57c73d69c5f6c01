-- purge-expired: delete at most @limit dead rows (expired leases and expired outcomes), oldest first.
-- A live lease has expires_at > @now and is never selected; nor is a dead lease still reserved for its
-- fingerprint (reserved_until > @now, see 0002_reservations_and_steps.sql): a claim with another
-- fingerprint must keep finding it. reserved_until is ignored on completed rows. A deleted row's recorded
-- steps go with it.
-- Params: @now INTEGER (epoch ms), @limit INTEGER. Returns: changes = rows deleted.
DELETE FROM "idempotency_records"
WHERE key IN (
  SELECT key FROM "idempotency_records"
  WHERE expires_at <= @now
    AND (status = 'completed' OR reserved_until IS NULL OR reserved_until <= @now)
  ORDER BY expires_at
  LIMIT @limit
);
