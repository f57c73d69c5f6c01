-- stats: counts by status, stale leases and the age of the oldest live lease (a full scan: admin only).
-- A stale lease is a dead in_progress row not yet taken over or purged, reserved (migration 0005) or not.
-- $n params: none.
-- Returns one row: in_progress, completed, stale_leases (bigint text), oldest_lease_age_ms (float8 or null).
SELECT
  count(*) FILTER (WHERE status = 'in_progress' AND expires_at > now()) AS in_progress,
  count(*) FILTER (WHERE status = 'completed' AND expires_at > now()) AS completed,
  count(*) FILTER (WHERE status = 'in_progress' AND expires_at <= now()) AS stale_leases,
  floor(extract(epoch FROM now() - min(created_at)
    FILTER (WHERE status = 'in_progress' AND expires_at > now())) * 1000)::float8 AS oldest_lease_age_ms
FROM {{table}};
