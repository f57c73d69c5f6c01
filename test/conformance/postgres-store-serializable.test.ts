/**
 * The store conformance suite on connections whose `default_transaction_isolation` is serializable (set for
 * a server, a database or a role), where every statement the store sends alone runs at that level. Before
 * the store ran a statement refused with 40001 again at read committed (src/postgres/read-committed.ts), the
 * takeover storm's last holders failed to complete their keys: completions of different keys sent at the
 * same time failed each other ("could not serialize access due to read/write dependencies among
 * transactions").
 */
import type pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { postgresStore } from '../../src/postgres/index.js';
import { defineStoreSuite } from '../../src/testing/index.js';
import { type PostgresFixture, setupPostgres, uniqueSchema } from '../helpers/postgres-env.js';
import { isolatedPool } from '../helpers/postgres-store-factory.js';

// Fixed at load time: the storm children are told about it while tests are collected.
const schema = uniqueSchema('conf_ser');
let fixture: PostgresFixture | undefined;
let pool: pg.Pool | undefined;

beforeAll(async () => {
  fixture = await setupPostgres('conf_ser', { schema });
  pool = isolatedPool('serializable', 5);
});

afterAll(async () => {
  await pool?.end();
  await fixture?.dispose();
});

defineStoreSuite({
  name: 'postgres, serializable by default',
  storeClock: 'backend',
  createStore: () => {
    if (pool === undefined) throw new Error('beforeAll did not run');
    return postgresStore({ pool, schema });
  },
  crossProcess: {
    module: new URL('../helpers/postgres-store-factory.ts', import.meta.url),
    argument: { schema, isolation: 'serializable' },
    processes: 4,
    claimsPerProcess: 2000,
    keys: 200,
  },
});
