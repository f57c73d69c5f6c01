/**
 * The plans the batch functions keep per connection (migration 0007, `force_generic_plan`): made once, on
 * whatever the table looked like then, and reused as it grows. The claim is that they can only read the
 * table by its primary key, so a plan made on an empty table stays right on a large one. Checked on a real
 * server with auto_explain, which logs the plan of every statement the functions run.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tableNames } from '../../../src/postgres/identifiers.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

let fixture: PostgresFixture;
let client: pg.Client;

beforeAll(async () => {
  fixture = await setupPostgres('plans');
  client = new pg.Client({ connectionString: fixture.pool.options.connectionString });
  await client.connect();
});

afterAll(async () => {
  await client?.end();
  await fixture?.dispose();
});

/** The batch call the store sends (`completeClaimCall` in src/postgres/operations.ts), prepared. */
async function completeClaim(
  completions: Array<{ key: string; token: string }>,
  claims: string[],
): Promise<Array<Record<string, unknown>>> {
  const names = tableNames(fixture.schema);
  const { rows } = await client.query({
    name: 'complete-claim',
    text: `SELECT * FROM ${names.completeClaimFunction}($1, $2, $3, $4, $5, $6, $7, $8)`,
    values: [
      completions.map((c) => c.key),
      completions.map((c) => c.token),
      completions.map(() => Buffer.from('ok')),
      completions.map(() => 60_000),
      claims,
      claims.map(() => 'fp'),
      claims.map(() => 60_000),
      claims.map(() => 0),
    ],
  });
  return rows;
}

const claimed = (rows: Array<Record<string, unknown>>) =>
  rows
    .filter((row) => row.completed === null && row.claimed === true)
    .map((row) => ({ key: String(row.key), token: String(row.token) }));

describe('the batch functions’ cached plans', () => {
  it('read the table by its primary key only, when made on an empty table and used on a large one', async () => {
    // Arrange: this connection makes its plans on the empty table (claims, then completions and claims).
    const first = claimed(await completeClaim([], ['a1', 'a2', 'a3']));
    expect(first).toHaveLength(3);
    const second = claimed(await completeClaim(first, ['b1', 'b2', 'b3']));
    expect(second).toHaveLength(3);
    // 20,000 live records arrive from elsewhere, with no ANALYZE: the cached plans stay.
    const names = tableNames(fixture.schema);
    await fixture.pool.query(
      `INSERT INTO ${names.table} (key, status, fingerprint, token, attempt, created_at, expires_at)
       SELECT 'live-' || g, 'in_progress', 'fp', 1000000 + g, 1, now(), now() + interval '1 hour'
       FROM generate_series(1, 20000) AS g`,
    );
    const plans: string[] = [];
    client.on('notice', (notice) => plans.push(notice.message ?? ''));
    await client.query(
      "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on; SET auto_explain.log_level = notice",
    );

    // Act: complete b1–b3 (b1 twice: a retried completion), claim c1 and c2 and a live key.
    const rows = await completeClaim(second, ['c1', 'c2', 'live-7']);
    const again = await completeClaim([second[0]!], []);

    // Assert: the answers are right…
    expect(rows.filter((row) => row.completed === true).map((row) => row.key)).toEqual(
      expect.arrayContaining(['b1', 'b2', 'b3']),
    );
    expect(claimed(rows).map((row) => row.key)).toEqual(expect.arrayContaining(['c1', 'c2']));
    expect(rows.find((row) => row.key === 'live-7')).toMatchObject({
      claimed: false,
      status: 'in_progress',
      token: String(1000007),
    });
    expect(again.map((row) => [row.completed, row.key])).toEqual([[true, 'b1']]);
    // …and every statement the functions ran read the table through its primary key, nothing else.
    const statements = plans.filter((plan) => plan.includes(names.tableName));
    expect(statements.some((plan) => /UPDATE/.test(plan))).toBe(true);
    expect(statements.some((plan) => /INSERT INTO/.test(plan))).toBe(true);
    for (const plan of statements) {
      expect(plan).not.toMatch(/Seq Scan on idempotency_records/);
      expect(plan).not.toMatch(/expires_at_idx/);
    }
    const scans = statements.flatMap((plan) =>
      plan
        .split('\n')
        .filter(
          (line) =>
            /(Seq|Index|Index Only) Scan\b/.test(line) && line.includes('idempotency_records'),
        ),
    );
    expect(scans.length).toBeGreaterThan(0);
    for (const line of scans) expect(line).toMatch(/idempotency_records_pkey/);
  });
});
