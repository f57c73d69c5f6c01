/**
 * Opening the store a command line names: a PostgreSQL pool or a SQLite file here, a Redis client in
 * `redis-target.ts`, each through the user's installed driver (an optional peer), loaded only when that
 * store is named, so the CLI never needs the drivers of the stores it is not pointed at.
 * @module
 */
import { existsSync } from 'node:fs';
import { StoreUnavailableError } from '../core/errors.js';
import type { PgPool } from '../postgres/client.js';
import { postgresStore } from '../postgres/postgres-store.js';
import { sqliteStore } from '../sqlite/sqlite-store.js';
import type { Store } from '../store/store.js';
import type { DatabaseArgs } from './args.js';
import { postgresTarget } from './commands.js';
import { peer } from './peer.js';

/** An opened store, what the reports call it, and how to let it go. */
export interface OpenTarget {
  /** The store. */
  store: Store;
  /** The PostgreSQL pool, when the store is PostgreSQL (`migrate` works on it). */
  pool?: PgPool;
  /** How reports name what was read ({@link targetLabel}). */
  label: string;
  /** Close what was opened (the pool, the file, the client). */
  close(): Promise<void>;
}

interface PgModule {
  Pool: new (config: {
    connectionString: string;
    max?: number;
    application_name?: string;
    connectionTimeoutMillis?: number;
  }) => PgPool & {
    end(): Promise<void>;
    on(event: 'error', listener: (error: Error) => void): unknown;
  };
}

/**
 * How the reports name the store `args` names, known before it is opened (a `health` report of a store
 * that could not be opened names it too): `schema.table`, `file, table t` or `redis prefix p`; never a URL,
 * which may hold a password.
 */
export function targetLabel(args: DatabaseArgs): string {
  if (args.sqliteFile !== undefined) {
    return `${args.sqliteFile}, table ${args.table ?? 'idempotency_records'}`;
  }
  if (args.redisUrl !== undefined) {
    return `${args.redisCluster === true ? 'redis cluster' : 'redis'} prefix ${args.prefix ?? 'idem:'}`;
  }
  return postgresTarget(args);
}

/**
 * Open PostgreSQL: a one-connection pool, and the store on it. The pool connects on first use, within
 * `connectTimeoutMs` (pg's own default waits without a bound).
 */
export async function openPostgres(
  databaseUrl: string,
  args: DatabaseArgs,
  connectTimeoutMs: number,
): Promise<OpenTarget> {
  const pg = await peer<PgModule>('pg', 'PostgreSQL');
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: 1,
    application_name: 'idempotency-kit-cli',
    connectionTimeoutMillis: connectTimeoutMs,
  });
  // An idle connection dropped by the server must not crash the command with an unhandled event.
  pool.on('error', () => {});
  const store = postgresStore({
    pool,
    ...(args.schema && { schema: args.schema }),
    ...(args.table && { table: args.table }),
  });
  const label = targetLabel({ ...args, databaseUrl });
  return { store, pool, label, close: () => pool.end().catch(() => {}) };
}

/**
 * Open a SQLite file that must exist, without migrating it: a read command changes no schema (run
 * `migrate` for that), and a mistyped path must not leave an empty database behind.
 */
export function openSqlite(file: string, args: DatabaseArgs): OpenTarget {
  if (!existsSync(file)) throw new StoreUnavailableError(`SQLite store: no such file: ${file}`);
  const table = args.table ?? 'idempotency_records';
  let store: ReturnType<typeof sqliteStore>;
  try {
    store = sqliteStore({ database: file, table, migrate: false });
  } catch (error) {
    // The statements are prepared on open: a file without the table (or an older one) fails here.
    throw new StoreUnavailableError(
      `SQLite store: cannot read ${table} in ${file} (run \`idempotency-kit migrate --sqlite ${file}\` first?): ${(error as Error).message}`,
      { cause: error },
    );
  }
  return { store, label: targetLabel({ ...args, sqliteFile: file }), close: () => store.close() };
}
