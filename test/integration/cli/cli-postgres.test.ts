import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres/index.js';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';
import { hangAfterCharge } from '../../helpers/crashed-step.js';
import { env, requireService } from '../../helpers/env.js';
import { testPool, uniqueSchema } from '../../helpers/postgres-env.js';

const pool = testPool();
const schemas: string[] = [];

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
    expect(second.stdout).toMatch(/up to date \(version 8\)/);
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
      { id: 6, name: '0006_batch_lock_timeout' },
      { id: 7, name: '0007_generic_batch_plans' },
      { id: 8, name: '0008_bounded_single_statements' },
    ]);
  });

  it('takes --lock-timeout and --lock-retries: behind a long transaction, one 150 ms wait, then exit 1', async () => {
    // Arrange: a migrated table whose 0002_key_collation is pending again (its ALTER TABLE needs ACCESS
    // EXCLUSIVE), and a transaction holding a claimed row of it.
    const schema = freshSchema('clilock');
    expect(
      await cli(['migrate', '--database-url', env.databaseUrl, '--schema', schema]),
    ).toMatchObject({
      code: 0,
    });
    await pool.query(
      `ALTER TABLE "${schema}".idempotency_records ALTER COLUMN key TYPE text COLLATE "default"`,
    );
    await pool.query(`DELETE FROM "${schema}".idempotency_records_migrations WHERE id = 2`);
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(
        `INSERT INTO "${schema}".idempotency_records (key, status, fingerprint, token, attempt, created_at, expires_at)
         VALUES ('held', 'in_progress', 'fp', 1, 1, now(), now() + interval '1 minute')`,
      );
      // Act
      const run = await cli([
        'migrate',
        '--database-url',
        env.databaseUrl,
        '--schema',
        schema,
        '--lock-timeout',
        '150ms',
        '--lock-retries',
        '0',
      ]);
      // Assert: one attempt of 150 ms (the defaults: 5 of 2 s, with pauses), named in the message.
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr).toMatch(/after 1 attempt: each waited 150 ms \(lock_timeout\)/);
      expect(run.stderr).toMatch(/--lock-timeout \/ --lock-retries/);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
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

describe('idempotency-kit inspect and stats', () => {
  it('shows why a crashed request’s key refuses another body, then that the same request completed it', async () => {
    const schema = freshSchema('cliinsp');
    expect(
      (await cli(['migrate', '--database-url', env.databaseUrl, '--schema', schema])).code,
    ).toBe(0);
    const idempotency = createIdempotency({
      store: postgresStore({ pool, schema }),
      // Long enough for the CLI (a process started through tsx, 4 s and more on a loaded 2-core machine)
      // to see the lease live; the test then waits for it to end.
      leaseMs: 10_000,
      extendLease: false,
      cache: false,
    });
    const key = `order-${randomUUID()}`;
    const storageKey = idempotency.storageKeyFor(key);
    // The first attempt records its charge, then its process "dies": the handler never settles.
    await hangAfterCharge(idempotency, { key, payload: { amount: 5 } }, () => ({ id: 'ch_1' }));
    const live = await cli([
      'inspect',
      storageKey,
      '--database-url',
      env.databaseUrl,
      '--schema',
      schema,
    ]);
    expect(live).toMatchObject({ code: 0, stderr: '' });
    expect(live.stdout).toMatch(new RegExp(`^${storageKey}: in_progress\\n`));
    expect(live.stdout).toMatch(/HTTP 409 with Retry-After \d+ s/);
    expect(live.stdout).toMatch(/steps {8}charge \(\d+ bytes\)/);

    const held = await postgresStore({ pool, schema }).inspect(storageKey);
    const leaseUntil = held?.record.status === 'in_progress' ? held.record.leaseUntil : Date.now();
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, leaseUntil - Date.now()) + 200));
    // Another body under the dead request's key is refused; get() alone would show nothing here.
    expect(await idempotency.run({ key, payload: { amount: 9 } }, () => 'other')).toMatchObject({
      status: 'mismatch',
    });
    expect(await postgresStore({ pool, schema }).get(storageKey)).toBeUndefined();
    const crashed = await cli(['inspect', storageKey, '--schema', schema], {
      DATABASE_URL: env.databaseUrl,
    });
    expect(crashed).toMatchObject({ code: 0, stderr: '' });
    expect(crashed.stdout).toMatch(new RegExp(`^${storageKey}: crashed\\n`));
    expect(crashed.stdout).toMatch(/lease ended .* ago\) with no completion/);
    expect(crashed.stdout).toMatch(/reserved {5}for its own request until .*\(in 23 h 59 min\)/);
    expect(crashed.stdout).toMatch(/takes the key over \(attempt 2\)/);
    expect(crashed.stdout).toMatch(/HTTP 422 key_mismatch/);
    const json = await cli(['inspect', storageKey, '--json', '--schema', schema], {
      DATABASE_URL: env.databaseUrl,
    });
    const parsed = JSON.parse(json.stdout) as {
      state: string;
      source: string;
      now: number;
      record: {
        token: number;
        attempt: number;
        leaseUntil: number;
        reservedUntil: number;
        steps: Record<string, string>;
      };
    };
    expect(parsed).toMatchObject({ state: 'crashed', source: 'inspect', record: { attempt: 1 } });
    expect(parsed.record.leaseUntil).toBeLessThanOrEqual(parsed.now);
    expect(parsed.record.reservedUntil).toBeGreaterThan(parsed.now + 86_000_000);
    expect(Buffer.from(parsed.record.steps.charge as string, 'base64').byteLength).toBeGreaterThan(
      0,
    );

    const stats = await cli(['stats', '--schema', schema], { DATABASE_URL: env.databaseUrl });
    expect(stats.stdout).toMatch(/stale leases {7}1 /);
    expect(stats.stdout).toMatch(/in progress {8}0\n/);

    // The same request retried takes the key over, resumes after its charge, and completes.
    const retry = await idempotency.run({ key, payload: { amount: 5 } }, async (ctx) =>
      ctx.step('charge', () => ({ id: 'ch_2' })),
    );
    expect(retry).toMatchObject({ status: 'executed', attempt: 2, value: { id: 'ch_1' } });
    const done = await cli(['inspect', storageKey, '--schema', schema], {
      DATABASE_URL: env.databaseUrl,
    });
    expect(done.stdout).toMatch(new RegExp(`^${storageKey}: completed\\n`));
    expect(done.stdout).toMatch(/outcome {6}\d+ bytes/);
    const statsJson = JSON.parse(
      (await cli(['stats', '--json', '--schema', schema], { DATABASE_URL: env.databaseUrl }))
        .stdout,
    ) as Record<string, unknown>;
    expect(statsJson).toMatchObject({ inProgress: 0, completed: 1, staleLeases: 0 });

    const absent = await cli(['inspect', 'f'.repeat(64), '--schema', schema], {
      DATABASE_URL: env.databaseUrl,
    });
    expect(absent.stdout).toMatch(/absent — no record; the next request with this key runs\n$/);
  });

  it('exits 2 when inspect has no key, or --json is given to another command', async () => {
    const missing = await cli(['inspect', '--database-url', env.databaseUrl]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/inspect needs the storage key/);
    const json = await cli(['purge', '--json', '--database-url', env.databaseUrl]);
    expect(json.code).toBe(2);
    expect(json.stderr).toMatch(/--json applies to inspect, stats, list and health only/);
  });
});
