-- blocking-table-lock: whether another session holds, or waits for, a lock on the records table, one of its
-- indexes or its token sequence in a mode that the store's writes (ROW EXCLUSIVE) must wait for: SHARE or
-- stronger (ALTER TABLE, LOCK TABLE, VACUUM FULL, CLUSTER, REINDEX, CREATE INDEX, a migration's request
-- queued behind a long transaction). Run only after a statement gave up waiting for a lock that PostgreSQL
-- did not name (see src/postgres/table-lock.ts).
-- $1 schema name text, $2 table name text (unquoted).
-- Returns one row: blocked boolean.
-- It reads the catalogs and pg_locks only, never the records table: it takes no lock that it could wait for
-- behind the lock it looks for.
SELECT EXISTS (
  SELECT 1
  FROM pg_locks AS l
  JOIN pg_class AS c ON c.oid = l.relation
  JOIN pg_namespace AS n ON n.oid = c.relnamespace
  WHERE l.locktype = 'relation'
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND l.pid <> pg_backend_pid()
    AND l.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
    AND n.nspname = $1::text
    AND (c.relname::text IN ($2::text, $2::text || '_token_seq')
      OR c.oid IN (
        SELECT i.indexrelid FROM pg_index AS i JOIN pg_class AS t ON t.oid = i.indrelid
        WHERE t.relnamespace = n.oid AND t.relname::text = $2::text
      ))
) AS blocked;
