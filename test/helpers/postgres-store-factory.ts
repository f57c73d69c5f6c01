/**
 * Factory the cross-process claim storm imports in each child process: its own pool, the shared schema.
 */
import pg from 'pg';
import { postgresStore } from '../../src/postgres/index.js';
import type { Store } from '../../src/store/store.js';
import { env } from './env.js';
import { testPool } from './postgres-env.js';

/** Argument passed by the storm to every child. */
export interface PostgresFactoryArgument {
  schema: string;
  /** The pool's `default_transaction_isolation`, as a server, database or role would set it. */
  isolation?: string;
}

/** Build a store on a fresh pool (the storm child exits without closing it). */
export function createStore(argument: PostgresFactoryArgument): Store {
  return postgresStore({
    pool:
      argument.isolation === undefined
        ? testPool({ max: 4, applicationName: 'ik-storm' })
        : isolatedPool(argument.isolation),
    schema: argument.schema,
  });
}

/** A pool whose transactions run at `isolation` unless a statement says otherwise. */
export function isolatedPool(isolation: string, max = 4): pg.Pool {
  const pool = new pg.Pool({
    connectionString: env.databaseUrl,
    max,
    application_name: 'ik-storm',
    options: `-c default_transaction_isolation=${isolation.replace(' ', '\\ ')}`,
  });
  pool.on('error', () => {});
  return pool;
}
