/**
 * An empty `--schema` or `--table` (a shell variable that was not set: `--table "$TABLE"`) is refused as a
 * usage error. It was read as absent, so the command ran on the default schema or table: on a database that
 * several applications share, another application's records (`purge` deleted them).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../../../src/index.js';
import { migrate, postgresStore } from '../../../src/postgres/index.js';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';
import { env, requireService } from '../../helpers/env.js';
import { testPool, uniqueSchema } from '../../helpers/postgres-env.js';

const pool = testPool({ max: 2 });
const schema = uniqueSchema('cliempty');
// The table `migrate --schema ""` was meant for: unique, so that what an old build creates in public by
// mistake is this run's alone, and dropped in afterAll.
const strayTable = `cliempty_${process.pid}`;

beforeAll(async () => {
  await requireService('PostgreSQL', env.databaseUrl);
  // Two applications in one schema: the default table, and `mine`, the one the command was meant for.
  await migrate(pool, { schema });
  await migrate(pool, { schema, table: 'mine' });
  const other = createIdempotency({ store: postgresStore({ pool, schema }), retentionMs: 1 });
  await other.run({ key: 'other-app' }, async () => 'kept');
});

afterAll(async () => {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.query(
    `DROP TABLE IF EXISTS public."${strayTable}", public."${strayTable}_migrations" CASCADE`,
  );
  for (const suffix of ['claim_many', 'complete_many', 'complete_claim']) {
    await pool.query(`DROP FUNCTION IF EXISTS public."${strayTable}_${suffix}"`);
  }
  await pool.end();
});

const otherAppRows = async () =>
  (await pool.query(`SELECT count(*)::int AS n FROM "${schema}".idempotency_records`)).rows[0].n;

describe('idempotency-kit with an empty --table or --schema', () => {
  it('refuses purge --table "" instead of purging the default table', async () => {
    const run = await cli([
      'purge',
      '--database-url',
      env.databaseUrl,
      '--schema',
      schema,
      '--table',
      '',
    ]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/table must be 1-48 letters/);
    expect(await otherAppRows()).toBe(1);
  });

  it('refuses stats --table "" instead of reporting the default table', async () => {
    const run = await cli([
      'stats',
      '--database-url',
      env.databaseUrl,
      '--schema',
      schema,
      '--table',
      '',
    ]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
  });

  it('refuses migrate --schema "" instead of migrating the public schema', async () => {
    const run = await cli([
      'migrate',
      '--database-url',
      env.databaseUrl,
      '--schema',
      '',
      '--table',
      strayTable,
    ]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/schema must be 1-63 letters/);
    const { rows } = await pool.query('SELECT to_regclass($1) AS created', [
      `public.${strayTable}`,
    ]);
    expect(rows[0].created).toBeNull();
  });
});
