/** The HTTP conformance suite on the PostgreSQL store (a fresh schema per adapter), for every adapter. */
import { postgresStore } from '../../src/postgres/index.js';
import { allHarnesses } from '../helpers/http-adapters.js';
import { type PostgresFixture, setupPostgres } from '../helpers/postgres-env.js';
import { describeHttpSuite } from './http.suite.js';

for (const harness of allHarnesses) {
  let fixture: PostgresFixture | undefined;
  describeHttpSuite(harness, {
    name: 'postgres',
    async create() {
      fixture = await setupPostgres(`http_${harness.name}`, { max: 10 });
      return postgresStore({ pool: fixture.pool, schema: fixture.schema });
    },
    cleanup: async () => fixture?.dispose(),
  });
}
