-- stats: counts by status (one scan of the table).
-- Params: @now INTEGER (epoch ms).
-- Returns: one row (in_progress, completed, stale_leases: dead leases not purged yet, reserved ones
--          included; oldest_created_at: created_at of the oldest live lease, or NULL).
SELECT
  coalesce(sum(status = 'in_progress' AND expires_at > @now), 0)  AS in_progress,
  coalesce(sum(status = 'completed' AND expires_at > @now), 0)    AS completed,
  coalesce(sum(status = 'in_progress' AND expires_at <= @now), 0) AS stale_leases,
  min(CASE WHEN status = 'in_progress' AND expires_at > @now THEN created_at END) AS oldest_created_at
FROM "idempotency_records";
