import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresStore } from '../../../src/postgres/index.js';
import { env, requireService } from '../../helpers/env.js';
import { testPool, uniqueSchema } from '../../helpers/postgres-env.js';

const main = fileURLToPath(new URL('../../../src/cli/main.ts', import.meta.url));
const pool = testPool();
const schemas: string[] = [];

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

function cli(args: string[], extraEnv: Record<string, string> = {}): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', main, ...args],
      { env: { ...process.env, ...extraEnv }, timeout: 60_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

function freshSchema(label: string): string {
  const schema = uniqueSchema(label);
  schemas.push(schema);
  return schema;
}

beforeAll(async () => {
  await requireService('PostgreSQL', env.databaseUrl);
});

afterAll(async () => {
  for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

describe('idempotency-kit migrate', () => {
  it('creates the records table, then reports it up to date', async () => {
    const schema = freshSchema('climig');
    const first = await cli(['migrate', '--database-url', env.databaseUrl, '--schema', schema]);
    expect(first).toMatchObject({ code: 0, stderr: '' });
    expect(first.stdout).toMatch(/applied 0001_records/);
    const second = await cli(['migrate', '--schema', schema], { DATABASE_URL: env.databaseUrl });
    expect(second.code).toBe(0);
    expect(second.stdout).toMatch(/up to date \(version 5\)/);
    const { rows } = await pool.query(
      "SELECT relpersistence FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = 'idempotency_records'",
      [schema],
    );
    // 'p' = permanent (logged): never UNLOGGED.
    expect(rows).toEqual([{ relpersistence: 'p' }]);
  });

  it('is safe when several processes migrate the same table at once', async () => {
    const schema = freshSchema('clirace');
    const runs = await Promise.all(
      Array.from({ length: 4 }, () =>
        cli(['migrate', '--database-url', env.databaseUrl, '--schema', schema, '--table', 'keys']),
      ),
    );
    for (const run of runs) expect(run, run.stderr).toMatchObject({ code: 0, stderr: '' });
    expect(runs.filter((r) => r.stdout.includes('applied 0001_records'))).toHaveLength(1);
    const { rows } = await pool.query(
      `SELECT id, name FROM "${schema}".keys_migrations ORDER BY id`,
    );
    expect(rows).toEqual([
      { id: 1, name: '0001_records' },
      { id: 2, name: '0002_key_collation' },
      { id: 3, name: '0003_batch_functions' },
      { id: 4, name: '0004_complete_claim_function' },
      { id: 5, name: '0005_reservations_and_steps' },
    ]);
  });

  it('exits 2 for a schema name that is not a plain identifier, touching nothing', async () => {
    const run = await cli([
      'migrate',
      '--database-url',
      env.databaseUrl,
      '--schema',
      'x"; DROP SCHEMA public; --',
    ]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/schema must be/);
  });

  it('exits 1 with a clear message when the database cannot be reached', async () => {
    const run = await cli(['migrate', '--database-url', 'postgres://postgres@127.0.0.1:1/test']);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/migrate failed: .*ECONNREFUSED/);
  });

  it('exits 2 and points to --help for an unknown option or a missing URL', async () => {
    const unknown = await cli(['migrate', '--database-url', env.databaseUrl, '--frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/--help/);
    const missing = await cli(['purge'], { DATABASE_URL: '' });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--database-url/);
  });
});

describe('idempotency-kit purge', () => {
  it('deletes expired records in bounded batches and keeps live ones', async () => {
    const schema = freshSchema('clipurge');
    expect(
      (await cli(['migrate', '--database-url', env.databaseUrl, '--schema', schema])).code,
    ).toBe(0);
    const store = postgresStore({ pool, schema });
    const live = `live-${randomUUID()}`;
    const held = await store.claim(live, { fingerprint: 'f', leaseMs: 60_000 });
    expect(held.claimed).toBe(true);
    for (let i = 0; i < 5; i++)
      await store.claim(`dead-${i}-${randomUUID()}`, { fingerprint: 'f', leaseMs: 20 });
    await new Promise((resolve) => setTimeout(resolve, 100));

    const bounded = await cli([
      'purge',
      '--database-url',
      env.databaseUrl,
      '--schema',
      schema,
      '--limit',
      '2',
      '--batches',
      '1',
    ]);
    expect(bounded.code).toBe(0);
    expect(bounded.stdout).toMatch(/purged 2 expired records in 1 batch\b/);
    const rest = await cli([
      'purge',
      '--database-url',
      env.databaseUrl,
      '--schema',
      schema,
      '--limit',
      '2',
    ]);
    expect(rest.code).toBe(0);
    expect(rest.stdout).toMatch(/purged 3 expired records in 2 batches/);

    expect((await store.get(live))?.status).toBe('in_progress');
    if (held.claimed) expect(await store.extend(live, held.token, 60_000)).toBe(true);
  });

  it('exits 2 for a limit that is not a positive integer', async () => {
    const run = await cli(['purge', '--database-url', env.databaseUrl, '--limit', '0']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/--limit must be a positive integer/);
  });
});
