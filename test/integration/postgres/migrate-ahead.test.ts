/**
 * `migrate()` of an older release on a table that a newer release already migrated further (a rolling
 * deploy, a rollback): nothing to apply, nothing to fail, but the result must say the table is ahead.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateCommand } from '../../../src/cli/commands.js';
import { migrate, postgresStore } from '../../../src/postgres/index.js';
import { migrations } from '../../../src/postgres/migrations.gen.js';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';
import { env, requireService } from '../../helpers/env.js';
import { testPool, uniqueSchema } from '../../helpers/postgres-env.js';

const pool = testPool();
const schemas: string[] = [];
const latest = Math.max(...migrations.map((m) => m.id));

beforeAll(async () => {
  await requireService('PostgreSQL', env.databaseUrl);
});

afterAll(async () => {
  for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

/** A table this release migrated, then a newer release's two further migrations recorded on it. */
async function tableAhead(label: string): Promise<string> {
  const schema = uniqueSchema(label);
  schemas.push(schema);
  await migrate(pool, { schema });
  await pool.query(
    `INSERT INTO "${schema}".idempotency_records_migrations (id, name) VALUES ($1, $2), ($3, $4)`,
    [latest + 1, 'future_one', latest + 2, 'future_two'],
  );
  return schema;
}

describe('migrate() on a table a newer release migrated', () => {
  it('applies nothing, keeps working, and says the table is at a newer version than this release knows', async () => {
    const schema = await tableAhead('migahead');
    const result = await migrate(pool, { schema });
    expect(result).toMatchObject({ applied: [], version: latest, schemaVersion: latest + 2 });
    expect(result.warning).toMatch(
      new RegExp(
        `at version ${latest + 2}, newer than this release knows \\(${latest}\\).*future_two`,
      ),
    );
    // Old code on the newer table goes on serving (a rolling deploy).
    const store = postgresStore({ pool, schema });
    expect((await store.claim('k', { fingerprint: 'f', leaseMs: 1000 })).claimed).toBe(true);
  });

  it('reports no warning on a table at this release’s version', async () => {
    const schema = uniqueSchema('migcurrent');
    schemas.push(schema);
    await migrate(pool, { schema });
    const result = await migrate(pool, { schema });
    expect(result).toEqual({ applied: [], version: latest });
  });

  it('has the CLI say the table is ahead, as a warning rather than a report', async () => {
    const schema = await tableAhead('cliahead');
    const lines: string[] = [];
    const warnings: string[] = [];
    await migrateCommand(
      pool,
      { schema },
      (line) => lines.push(line),
      (line) => warnings.push(line),
    );
    expect(warnings).toEqual([expect.stringMatching(/^idempotency-kit migrate: warning: /)]);
    expect(warnings[0]).toMatch(
      new RegExp(
        `${schema}\\.idempotency_records is at version ${latest + 2}, newer than this release`,
      ),
    );
    // Not "up to date", and nothing on the report's stream: it went there, unseen behind a deploy script.
    expect(lines).toEqual([]);
  });

  it('has `idempotency-kit migrate` write it to stderr and exit 0', async () => {
    const schema = await tableAhead('cliaheadbin');
    const run = await cli(['migrate', '--database-url', env.databaseUrl, '--schema', schema]);
    expect(run).toMatchObject({ code: 0, stdout: '' });
    expect(run.stderr).toMatch(
      new RegExp(
        `^idempotency-kit migrate: warning: ${schema}\\.idempotency_records is at version ${latest + 2}, ` +
          'newer than this release knows .*future_one, future_two\\..*\n$',
      ),
    );
  });
});
