import { afterAll, beforeAll } from 'vitest';
import { postgresStore } from '../../src/postgres/index.js';
import { defineStoreSuite } from '../../src/testing/index.js';
import { type PostgresFixture, setupPostgres, uniqueSchema } from '../helpers/postgres-env.js';
import { roundTripCounter } from '../helpers/round-trips.js';

// The schema name is fixed at load time, because the storm children are told about it while tests are
// collected; the schema itself is created and migrated in beforeAll and dropped in afterAll.
const schema = uniqueSchema('conf');
let fixture: PostgresFixture | undefined;
const counter = roundTripCounter();

beforeAll(async () => {
  fixture = await setupPostgres('conf', { schema });
});

afterAll(async () => {
  await fixture?.dispose();
});

defineStoreSuite({
  name: 'postgres',
  storeClock: 'backend',
  createStore: () => {
    if (fixture === undefined) throw new Error('beforeAll did not run');
    return postgresStore({ pool: counter.postgres(fixture.pool), schema });
  },
  // A batch of distinct keys is one statement.
  roundTrips: counter.count,
  crossProcess: {
    module: new URL('../helpers/postgres-store-factory.ts', import.meta.url),
    argument: { schema },
    processes: 4,
    claimsPerProcess: 2000,
    keys: 200,
  },
});
