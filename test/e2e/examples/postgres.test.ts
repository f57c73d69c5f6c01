/**
 * The PostgreSQL examples keep doing what their docs say, each run as a real process against the local
 * server, in a schema of this run (`EXAMPLE_SCHEMA`) dropped afterwards.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { env, requireService } from '../../helpers/env.js';
import { testPool, uniqueSchema } from '../../helpers/postgres-env.js';
import { assertExitedCleanly, runExample } from '../../helpers/run-example.js';

const pool = testPool({ max: 2 });
const schemas: string[] = [];

/** Run `file` in a schema of its own (`schema`, else a new one); returns its output and the schema. */
async function run(
  file: string,
  schema = uniqueSchema('exs'),
): Promise<{ output: string; schema: string }> {
  schemas.push(schema);
  const result = await runExample(file, {
    env: { DATABASE_URL: env.databaseUrl, EXAMPLE_SCHEMA: schema },
  });
  assertExitedCleanly(file, result);
  return { output: result.stdout, schema };
}

async function schemaExists(schema: string): Promise<boolean> {
  const { rowCount } = await pool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
  return rowCount === 1;
}

beforeAll(async () => {
  await requireService('PostgreSQL', env.databaseUrl);
});
afterAll(async () => {
  for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

describe('PostgreSQL examples', () => {
  it('postgres-store.ts: the mail replays; the order and its record commit together, once', async () => {
    const { output, schema } = await run('postgres-store.ts');
    expect(output).toContain('delivery 1: executed\ndelivery 2: replayed\n');
    const order = /order attempt 1: executed, order (\d+)\n/.exec(output);
    expect(order, output).not.toBeNull();
    expect(output).toContain(`order attempt 2: replayed, order ${order?.[1]}\n`);
    expect(output).toMatch(/purged \d+ expired records\n/);
    // Two attempts, one order row; and both keys completed in the records table.
    const orders = await pool.query(`SELECT id FROM "${schema}".orders`);
    expect(orders.rows).toEqual([{ id: Number(order?.[1]) }]);
    const records = await pool.query(
      `SELECT count(*)::int AS n FROM "${schema}".idempotency_records WHERE status = 'completed'`,
    );
    expect(records.rows[0].n).toBe(2);
  });

  it('fastify-postgres.ts: a replay, a 422 for the other int64 customer, one execution; drops its schema', async () => {
    // Created first, so that its absence afterwards shows the example dropped the schema it was given.
    const schema = uniqueSchema('exs');
    await pool.query(`CREATE SCHEMA "${schema}"`);
    const { output } = await run('fastify-postgres.ts', schema);
    const lines = output.split('\n');
    const created =
      /^201 - (\{"id":"ord_1","attempt":1,"body":\{"sku":"book","qty":1,"customer":\d+\}\})$/.exec(
        lines[0] ?? '',
      );
    expect(created, output).not.toBeNull();
    expect(lines[1]).toBe(`201 true ${created?.[1]}`);
    expect(lines[2]).toMatch(/^422 - \{.*"code":"key_mismatch"/);
    expect(lines[3]).toBe('handler ran 1 time(s)');
    expect(await schemaExists(schema)).toBe(false);
  });
});
