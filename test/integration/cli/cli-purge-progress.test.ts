/**
 * `purge` on a real PostgreSQL says how far it got while it runs: progress lines on stderr (records
 * deleted so far, the rate), the result alone on stdout, and nothing on stderr with `--quiet`. The interval
 * is shortened with `--progress-interval` so that a few thousand rows in small batches show several lines.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../../src/postgres/index.js';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';
import { env, requireService } from '../../helpers/env.js';
import { testPool, uniqueSchema } from '../../helpers/postgres-env.js';

const pool = testPool();
const schemas: string[] = [];
const EXPIRED = 3_000;
const LIMIT = 100;
const PROGRESS =
  /^idempotency-kit purge: (\d+) expired records deleted so far in (\d+) batch(?:es)? \(\d+\.\d s, \d+ records\/s\)$/;

beforeAll(async () => {
  await requireService('PostgreSQL', env.databaseUrl);
});

afterAll(async () => {
  for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

/** A migrated schema holding `EXPIRED` completed records past their retention. */
async function expiredRows(): Promise<string> {
  const schema = uniqueSchema('clipurgeprog');
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
  return schema;
}

async function left(schema: string): Promise<number> {
  const { rows } = await pool.query(
    `SELECT count(*)::int AS n FROM "${schema}".idempotency_records`,
  );
  return (rows[0] as { n: number }).n;
}

describe('idempotency-kit purge progress', () => {
  it('prints progress on stderr while it runs, and only the result on stdout', async () => {
    // Arrange
    const schema = await expiredRows();
    // Act: 30 full batches and a last empty one, a progress line due after each full batch
    const run = await cli([
      'purge',
      '--database-url',
      env.databaseUrl,
      '--schema',
      schema,
      '--limit',
      String(LIMIT),
      '--progress-interval',
      '1ms',
    ]);
    // Assert
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`purged ${EXPIRED} expired records in 31 batches\n`);
    const lines = run.stderr.split('\n').filter((line) => line !== '');
    expect(lines.length).toBeGreaterThanOrEqual(2);
    let previous = 0;
    for (const line of lines) {
      const match = PROGRESS.exec(line);
      expect(match, line).not.toBeNull();
      const [deleted, batches] = [Number(match?.[1]), Number(match?.[2])];
      expect(deleted).toBe(batches * LIMIT);
      expect(deleted).toBeGreaterThan(previous);
      expect(deleted).toBeLessThanOrEqual(EXPIRED);
      previous = deleted;
    }
    expect(await left(schema)).toBe(0);
  });

  it('prints no progress with --quiet (-q too)', async () => {
    // Arrange
    const [first, second] = [await expiredRows(), await expiredRows()];
    // Act
    const runs = await Promise.all(
      [
        [first, '--quiet'],
        [second, '-q'],
      ].map(([schema, quiet]) =>
        cli([
          'purge',
          '--database-url',
          env.databaseUrl,
          '--schema',
          schema as string,
          '--limit',
          String(LIMIT),
          quiet as string,
        ]),
      ),
    );
    // Assert
    for (const run of runs) {
      expect(run).toEqual({
        code: 0,
        stdout: `purged ${EXPIRED} expired records in 31 batches\n`,
        stderr: '',
      });
    }
    expect(await left(first)).toBe(0);
    expect(await left(second)).toBe(0);
  });

  it('refuses --quiet with --progress-interval, and either on another command (exit 2)', async () => {
    // Act
    const runs = await Promise.all([
      cli(['purge', '--database-url', env.databaseUrl, '--quiet', '--progress-interval', '1s']),
      cli(['stats', '--database-url', env.databaseUrl, '--quiet']),
    ]);
    // Assert
    expect(runs.map((run) => run.code)).toEqual([2, 2]);
    expect(runs[0]?.stderr).toContain('--quiet and --progress-interval: give one');
    expect(runs[1]?.stderr).toContain('--quiet and --progress-interval apply to purge only');
  });
});
