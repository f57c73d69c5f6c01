/**
 * Factory the cross-process claim storm imports in each child process: its own pool, the shared schema.
 */
import { postgresStore } from '../../src/postgres/index.js';
import type { Store } from '../../src/store/store.js';
import { testPool } from './postgres-env.js';

/** Argument passed by the storm to every child. */
export interface PostgresFactoryArgument {
  schema: string;
}

/** Build a store on a fresh pool (the storm child exits without closing it). */
export function createStore(argument: PostgresFactoryArgument): Store {
  return postgresStore({
    pool: testPool({ max: 4, applicationName: 'ik-storm' }),
    schema: argument.schema,
  });
}
