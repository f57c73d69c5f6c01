/**
 * Opening the store a command line names: a PostgreSQL pool or a SQLite file here, a Redis client in
 * `redis-target.ts`, each through the user's installed driver (an optional peer), loaded only when that
 * store is named, so the CLI never needs the drivers of the stores it is not pointed at.
 * @module
 */
import { existsSync } from 'node:fs';
import { StoreUnavailableError } from '../core/errors.js';
import { type PgPool, sqlState } from '../postgres/client.js';
import { postgresStore } from '../postgres/postgres-store.js';
import { openDatabase } from '../sqlite/client.js';
import { type SqliteStore, sqliteStore } from '../sqlite/sqlite-store.js';
import { HEALTH_PROBE_KEY } from '../store/health.js';
import type { Store } from '../store/store.js';
import type { DatabaseArgs } from './args.js';
import { postgresTarget } from './commands.js';
import { peer } from './peer.js';
import { reachWithin } from './reach-within.js';

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
  /**
   * Whether `error`, a `StoreUnavailableError` from a command on the opened store (which answered when it
   * was opened), means the store went away mid-command (a restart, a failover: running the command again
   * is safe) rather than that it answered with an error (a missing table, a refused permission).
   */
  interrupted(error: unknown): boolean;
}

/** `error` and its causes, a few levels deep: a store wraps the driver's error. */
export function causeChain(error: unknown): unknown[] {
  const chain: unknown[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current !== undefined && current !== null; depth++) {
    chain.push(current);
    current = current instanceof Error ? current.cause : undefined;
  }
  return chain;
}

interface PgModule {
  Pool: new (config: {
    connectionString: string;
    max?: number;
    application_name?: string;
    connectionTimeoutMillis?: number;
    query_timeout?: number;
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

/** `host:port/database` of a PostgreSQL URL, for messages: never the password the URL may hold. */
function serverOf(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port === '' ? '5432' : parsed.port}${parsed.pathname}`;
  } catch {
    return 'the --database-url server';
  }
}

/**
 * Whether a PostgreSQL failure is the connection going away: an error the server reported (it has a
 * SQLSTATE) is an answer, unless it is a connection exception (class 08) or a shutdown (class 57: an
 * administrator's restart, a crash, a failover); a driver error without one is a dropped or silent
 * connection.
 */
function isPostgresInterruption(error: unknown): boolean {
  const state = causeChain(error)
    .map(sqlState)
    .find((code) => code !== undefined);
  return state === undefined || state.startsWith('08') || state.startsWith('57');
}

/**
 * Open PostgreSQL: a one-connection pool, and the store on it. The pool would connect on first use: one
 * `SELECT 1` here, within `connectTimeoutMs` (pg's own default waits without a bound), makes a refused
 * connection, a wrong password or a missing database fail at open, where they are told apart from a
 * server that goes away once the command has started.
 * @param statementTimeoutMs how long a statement may go unanswered (pg's `query_timeout`, which also
 *   discards the connection); `undefined`: no bound
 */
export async function openPostgres(
  databaseUrl: string,
  args: DatabaseArgs,
  connectTimeoutMs: number,
  statementTimeoutMs?: number,
): Promise<OpenTarget> {
  const pg = await peer<PgModule>('pg', 'PostgreSQL');
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: 1,
    application_name: 'idempotency-kit-cli',
    connectionTimeoutMillis: connectTimeoutMs,
    // pg waits for an answer without a bound: a server that goes silent once the command has started (a
    // partition, a frozen primary) would hold the command, and a cron job, forever.
    ...(statementTimeoutMs !== undefined && { query_timeout: statementTimeoutMs }),
  });
  // An idle connection dropped by the server must not crash the command with an unhandled event.
  pool.on('error', () => {});
  const close = () => pool.end().catch(() => {});
  let store: Store;
  try {
    // Names first: a bad schema or table is a usage error, refused before connecting.
    store = postgresStore({
      pool,
      // An empty name is the store's to refuse, not absent: read as absent, it named another
      // application's table on a shared database (`--table "$UNSET"`).
      ...(args.schema !== undefined && { schema: args.schema }),
      ...(args.table !== undefined && { table: args.table }),
    });
    await reachWithin(
      pool.query('SELECT 1'),
      `PostgreSQL at ${serverOf(databaseUrl)}`,
      connectTimeoutMs,
    );
  } catch (error) {
    // Not awaited: a connection attempt that timed out ends on its own, within the same bound.
    void close();
    throw error;
  }
  const label = targetLabel({ ...args, databaseUrl });
  return { store, pool, label, close, interrupted: isPostgresInterruption };
}

/**
 * Fail, as any missing driver does (exit 1, with the install command), when better-sqlite3 is not
 * installed: the store itself reports that as `InvalidOptionsError` (for a library user, passing an open
 * `Database` is the other way out), which the CLI would take for a usage error.
 */
export async function requireSqliteDriver(): Promise<void> {
  await peer('better-sqlite3', 'SQLite');
}

/**
 * Open a SQLite file that must exist, without migrating it: a read command changes no schema (run
 * `migrate` for that), and a mistyped path must not leave an empty database behind. The store prepares
 * its statements on first use: one read here makes a file without the table (or with an older one) fail
 * at open, with the fix. The file's journal mode and pragmas are left as the application set them.
 * @throws InvalidOptionsError for a bad table name (a usage error); StoreUnavailableError otherwise.
 */
export async function openSqlite(file: string, args: DatabaseArgs): Promise<OpenTarget> {
  await requireSqliteDriver();
  if (!existsSync(file)) throw new StoreUnavailableError(`SQLite store: no such file: ${file}`);
  const table = args.table ?? 'idempotency_records';
  // Opened here and handed to the store as a connection of the caller's, whose pragmas it leaves alone:
  // the store switches a file it opens itself to WAL, which is a lasting change of the application's file
  // (every later connection journals that way) and a write, which a file the operator may only read
  // refuses. The busy timeout is the store's default.
  const db = openDatabase(file, 5000);
  let store: SqliteStore;
  try {
    store = sqliteStore({ database: db, table, migrate: false });
  } catch (error) {
    db.close();
    throw error;
  }
  const close = async () => {
    await store.close();
    if (db.open) db.close();
  };
  try {
    await store.get(HEALTH_PROBE_KEY);
  } catch (error) {
    await close();
    const cause = causeChain(error).at(-1);
    if (!/no such (?:table|column)/.test(String((cause as Error | undefined)?.message))) {
      throw error;
    }
    const migrate = `idempotency-kit migrate --sqlite ${file}${args.table === undefined ? '' : ` --table ${table}`}`;
    throw new StoreUnavailableError(
      `SQLite store: cannot read ${table} in ${file} (run \`${migrate}\` first?): ${(cause as Error).message}`,
      { cause: error },
    );
  }
  // A local file does not go away mid-command as a server does: its failures are answers.
  return {
    store,
    label: targetLabel({ ...args, sqliteFile: file }),
    close,
    interrupted: () => false,
  };
}
