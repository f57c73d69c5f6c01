/**
 * An operator who stops a long `purge` (Ctrl-C, or a cron wrapper's `timeout` sending SIGTERM) learns what
 * it had deleted: the batch in flight finishes, the command prints its total and exits 128 + the signal's
 * number, as shells report a command a signal stopped. A second signal ends it at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../../src/postgres/index.js';
import { startCli } from '../../helpers/cli.js';
import { env, requireService } from '../../helpers/env.js';
import { testPool, uniqueSchema } from '../../helpers/postgres-env.js';

const pool = testPool();
const schemas: string[] = [];
const EXPIRED = 100_000;

beforeAll(async () => {
  await requireService('PostgreSQL', env.databaseUrl);
});

afterAll(async () => {
  for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

/** Rows left in the schema's table. */
async function left(schema: string): Promise<number> {
  const { rows } = await pool.query(
    `SELECT count(*)::int AS n FROM "${schema}".idempotency_records`,
  );
  return (rows[0] as { n: number }).n;
}

describe('idempotency-kit purge stopped by a signal', () => {
  it.each([
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const)('%s: prints what it deleted and exits %i', async (signal, exitCode) => {
    // Arrange: 100 batches of expired rows (the default 1000 a batch): still running when signalled
    const schema = uniqueSchema('clipurgesig');
    schemas.push(schema);
    await migrate(pool, { schema });
    await pool.query(
      `INSERT INTO "${schema}".idempotency_records
         (key, status, fingerprint, token, attempt, outcome, created_at, completed_at, expires_at)
       SELECT md5(i::text) || md5((-i)::text), 'completed', 'f', i, 1, '\\x00',
         now() - interval '2 days', now() - interval '2 days', now() - interval '1 day'
       FROM generate_series(1, $1::int) AS i`,
      [EXPIRED],
    );
    const { child, exited } = startCli([
      'purge',
      '--database-url',
      env.databaseUrl,
      '--schema',
      schema,
    ]);
    // Act: signal once the purge is under way
    while ((await left(schema)) === EXPIRED) await new Promise((r) => setTimeout(r, 20));
    child.kill(signal);
    const { code, stdout, stderr } = await exited;
    // Assert: the count printed is what is gone, and rows are left (it stopped)
    const purged = EXPIRED - (await left(schema));
    expect(stderr).toBe('');
    expect(code).toBe(exitCode);
    expect(purged).toBeLessThan(EXPIRED);
    expect(stdout).toBe(
      `purged ${purged} expired records in ${purged / 1000} batches; stopped by ${signal}\n`,
    );
  });
});
