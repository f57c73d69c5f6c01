import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStoreUnavailableError } from '../../../src/index.js';
import { migrateOutbox } from '../../../src/outbox/index.js';
import { isBatchFunctionUnusable } from '../../../src/postgres/batch-functions.js';
import { renderSql, tableNames } from '../../../src/postgres/identifiers.js';
import { migrate, postgresStore } from '../../../src/postgres/index.js';
import { migrations } from '../../../src/postgres/migrations.gen.js';
import { env, requireService } from '../../helpers/env.js';
import {
  applyMigrations,
  setBatchLockTimeout,
  testPool,
  uniqueSchema,
} from '../../helpers/postgres-env.js';

const pool = testPool({ max: 3 });
const schemas: string[] = [];
const fresh = (label: string) => {
  const schema = uniqueSchema(label);
  schemas.push(schema);
  return schema;
};

/** A schema as `migrate()` would leave it with only the migrations up to `version` in the package. */
const migrateTo = (schema: string, version: number) => applyMigrations(pool, schema, 1, version);

/** Each batch function of `schema` with its settings (`pg_proc.proconfig`). */
async function functionSettings(schema: string): Promise<Record<string, string[] | null>> {
  const { rows } = await pool.query(
    `SELECT p.proname, p.proconfig
     FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1`,
    [schema],
  );
  return Object.fromEntries(rows.map((row) => [row.proname, row.proconfig]));
}

/**
 * The functions of migration 0008, and the settings each is created with: a lock timeout for the claim and
 * the release only (a completion, an extension or a step that gave up after the handler's effect could let
 * a retry run it again).
 */
const PLAN_SETTINGS = ['plan_cache_mode=force_generic_plan', 'enable_seqscan=off'];
const BOUNDED_SETTINGS = ['lock_timeout=100ms', ...PLAN_SETTINGS];
const SINGLE_SETTINGS: Record<string, string[]> = {
  idempotency_records_claim_one: BOUNDED_SETTINGS,
  idempotency_records_complete_one: PLAN_SETTINGS,
  idempotency_records_extend_one: PLAN_SETTINGS,
  idempotency_records_release_one: BOUNDED_SETTINGS,
  idempotency_records_save_step_one: PLAN_SETTINGS,
};

/**
 * The claim-many statement as code older than 0005 sends it, which knows no reservation: the body of 0003's
 * claim_many function (the statement as of that migration, unchanged until 0005).
 */
function preReservationClaimMany(schema: string): string {
  const text = migrations.find((m) => m.id === 3)?.sql ?? '';
  const body = text.slice(text.indexOf('  WITH input AS'), text.indexOf('  FROM blocking;'));
  return renderSql(`${body}  FROM blocking;`, tableNames(schema));
}

beforeAll(async () => {
  await requireService('PostgreSQL', env.databaseUrl);
});

afterAll(async () => {
  for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

describe('migrate', () => {
  it('applies each migration once when several pools migrate the same table at once', async () => {
    const schema = fresh('mig');
    const pools = Array.from({ length: 4 }, () => testPool({ max: 1 }));
    try {
      const results = await Promise.all(pools.map((p) => migrate(p, { schema })));
      expect(results.filter((r) => r.applied.length > 0)).toEqual([
        {
          applied: [
            '0001_records',
            '0002_key_collation',
            '0003_batch_functions',
            '0004_complete_claim_function',
            '0005_reservations_and_steps',
            '0006_batch_lock_timeout',
            '0007_generic_batch_plans',
            '0008_bounded_single_statements',
          ],
          version: 8,
        },
      ]);
      expect(results.every((r) => r.version === 8)).toBe(true);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  it('migrates several tables and the outbox into one new schema at once', async () => {
    // Each migrator locks its own table only, so all of them create the new schema concurrently.
    for (let round = 0; round < 5; round++) {
      const schema = fresh('migschema');
      const pools = Array.from({ length: 4 }, () => testPool({ max: 1 }));
      try {
        const results = await Promise.allSettled([
          migrate(pools[0]!, { schema }),
          migrate(pools[1]!, { schema, table: 'other_records' }),
          migrate(pools[2]!, { schema, table: 'third_records' }),
          migrateOutbox(pools[3]!, { schema }),
        ]);
        expect(results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual([
          'ok',
          'ok',
          'ok',
          'ok',
        ]);
      } finally {
        await Promise.all(pools.map((p) => p.end()));
      }
      const { rows } = await pool.query(
        'SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = $1 AND tablename = ANY($2)',
        [schema, ['idempotency_records', 'other_records', 'third_records', 'idempotency_outbox']],
      );
      expect(rows[0].n).toBe(4);
    }
  });

  it('migrates one table of a shared database without touching another schema’s or table’s older release', async () => {
    // Two applications on one database: one still on a release whose newest migration is 0004, the
    // other (a second schema, and a second table beside the first) migrating to this release.
    const older = fresh('migolder');
    const newer = fresh('mignewer');
    await migrateTo(older, 4);
    const signatures = async () =>
      (
        await pool.query(
          `SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args, p.proconfig
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE n.nspname = $1 ORDER BY p.proname`,
          [older],
        )
      ).rows;
    const before = await signatures();
    await migrate(pool, { schema: newer });
    await migrate(pool, { schema: older, table: 'other_records' });
    // The older table keeps its migrations and its functions: 0004's, whose claim_many takes no reservations.
    const { rows } = await pool.query(
      `SELECT max(id)::int AS version FROM "${older}".idempotency_records_migrations`,
    );
    expect(rows[0].version).toBe(4);
    const after = await signatures();
    expect(after.filter((row) => row.proname.startsWith('idempotency_records_'))).toEqual(before);
    expect(before.find((row) => row.proname === 'idempotency_records_claim_many')?.args).toBe(
      'text[], text[], double precision[]',
    );
    // The tools of each table see its records only.
    const olderStore = postgresStore({ pool, schema: older });
    const otherStore = postgresStore({ pool, schema: older, table: 'other_records' });
    await otherStore.claim('k', { fingerprint: 'fp', leaseMs: 60_000 });
    expect((await olderStore.stats()).inProgress).toBe(0);
    expect((await otherStore.stats()).inProgress).toBe(1);
  });

  it('waits for another migrator holding the advisory lock', async () => {
    const schema = fresh('miglock');
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
        `idempotency-kit:migrate:${schema}.idempotency_records`,
      ]);
      let settled = false;
      const migrating = migrate(pool, { schema }).finally(() => {
        settled = true;
      });
      // The migrator blocks on the lock: the schema does not exist while the holder keeps it.
      for (let i = 0; i < 200; i++) {
        const { rows } = await pool.query(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE '%pg_advisory_xact_lock%' AND pid <> pg_backend_pid()",
        );
        if (rows[0].n > 0) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(settled).toBe(false);
      await holder.query('COMMIT');
      expect((await migrating).applied).toEqual([
        '0001_records',
        '0002_key_collation',
        '0003_batch_functions',
        '0004_complete_claim_function',
        '0005_reservations_and_steps',
        '0006_batch_lock_timeout',
        '0007_generic_batch_plans',
        '0008_bounded_single_statements',
      ]);
    } finally {
      holder.release();
    }
  });

  it('works on a single connected client and leaves a usable store', async () => {
    const schema = fresh('migclient');
    const client = await pool.connect();
    try {
      expect((await migrate(client, { schema, table: 'records' })).applied).toEqual([
        '0001_records',
        '0002_key_collation',
        '0003_batch_functions',
        '0004_complete_claim_function',
        '0005_reservations_and_steps',
        '0006_batch_lock_timeout',
        '0007_generic_batch_plans',
        '0008_bounded_single_statements',
      ]);
      expect((await migrate(client, { schema, table: 'records' })).applied).toEqual([]);
    } finally {
      client.release();
    }
    const store = postgresStore({ pool, schema, table: 'records' });
    expect((await store.claim('k', { fingerprint: 'f', leaseMs: 1000 })).claimed).toBe(true);
  });

  it('moves a table made by 0001 to byte-order keys (COLLATE "C"), keeping its records', async () => {
    // Arrange: a table as 0001 left it, with a completed record and a live claim in it.
    const schema = fresh('migcollate');
    await migrate(pool, { schema });
    const table = `"${schema}".idempotency_records`;
    await pool.query(`ALTER TABLE ${table} ALTER COLUMN key TYPE text COLLATE "default"`);
    await pool.query(`DELETE FROM "${schema}".idempotency_records_migrations WHERE id = 2`);
    const store = postgresStore({ pool, schema });
    const done = await store.claim('done', { fingerprint: 'f', leaseMs: 60_000 });
    if (!done.claimed) throw new Error('expected a claim');
    await store.complete('done', done.token, new Uint8Array([1, 2, 3]), 60_000);
    const live = await store.claim('live', { fingerprint: 'f', leaseMs: 60_000 });
    const collation = async () =>
      (
        await pool.query(
          `SELECT collation_name FROM information_schema.columns
           WHERE table_schema = $1 AND table_name = 'idempotency_records' AND column_name = 'key'`,
          [schema],
        )
      ).rows[0]?.collation_name as string | null;
    expect(await collation()).not.toBe('C');
    // Act
    const result = await migrate(pool, { schema });
    // Assert: the column compares bytes, and both records survived with their tokens.
    expect(result.applied).toEqual(['0002_key_collation']);
    expect(await collation()).toBe('C');
    expect(await store.get('done')).toMatchObject({ status: 'completed', token: done.token });
    expect((await store.claim('live', { fingerprint: 'f', leaseMs: 60_000 })).claimed).toBe(false);
    expect(live.claimed).toBe(true);
  });

  it('tells code newer than the table to migrate, then claims with reservations and records steps once 0005 is applied', async () => {
    // Arrange: a table at 0004, with a live claim, a dead lease and a completed record written by the
    // code of that time (0003's claim_many and complete_many, whose statements know no reservation and
    // no steps).
    const schema = fresh('mig4');
    await migrateTo(schema, 4);
    const claimMany = `SELECT * FROM "${schema}".idempotency_records_claim_many($1, $2, $3)`;
    const seeded = await pool.query(claimMany, [
      ['live', 'dead', 'done'],
      ['fp-a', 'fp-a', 'fp-a'],
      [60_000, 1, 60_000],
    ]);
    const tokens = new Map(seeded.rows.map((row) => [row.key as string, Number(row.token)]));
    const completed = await pool.query(
      `SELECT * FROM "${schema}".idempotency_records_complete_many($1, $2, $3, $4)`,
      [['done'], [tokens.get('done')], [Buffer.from('ok')], [60_000]],
    );
    expect(completed.rows).toEqual([{ key: 'done' }]);
    const store = postgresStore({ pool, schema });
    await new Promise((resolve) => setTimeout(resolve, 20));
    // Act / Assert: every claim fails closed with a message that names the fix; reads still work.
    const reserve = { fingerprint: 'fp-b', leaseMs: 60_000, reserveMs: 3_600_000 };
    const single = await store.claim('new', reserve).catch((e) => e);
    expect(isStoreUnavailableError(single)).toBe(true);
    expect(single.message).toMatch(/lacks migration 0005_reservations_and_steps: run migrate\(\)/);
    const batch = await store.claimMany!([
      { key: 'new-a', ...reserve },
      { key: 'new-b', ...reserve },
    ]).catch((e) => e);
    expect(isStoreUnavailableError(batch)).toBe(true);
    expect(batch.message).toMatch(/lacks migration 0005_reservations_and_steps/);
    // complete.sql clears the steps column too: it needs 0005 as the claims do (a store cannot hold a
    // claim there to complete). The steps calls fail closed the same way.
    const liveToken = tokens.get('live')!;
    // One call at a time (thunks): a call started early would reject with no handler attached yet.
    for (const call of [
      () => store.complete('live', liveToken, Buffer.from('ok'), 60_000),
      () => store.saveStep('live', liveToken, 'charge', Buffer.from('x')),
      () => store.loadSteps('live', liveToken),
    ]) {
      const error = await call().catch((e) => e);
      expect(isStoreUnavailableError(error)).toBe(true);
      expect(error.message).toMatch(/lacks migration 0005_reservations_and_steps: run migrate\(\)/);
    }
    expect(await store.get('live')).toMatchObject({
      status: 'in_progress',
      token: tokens.get('live'),
    });
    // Act: migrate.
    expect((await migrate(pool, { schema })).applied).toEqual([
      '0005_reservations_and_steps',
      '0006_batch_lock_timeout',
      '0007_generic_batch_plans',
      '0008_bounded_single_statements',
    ]);
    // Assert: the same store claims now; the old rows carry no reservation and keep their state.
    expect((await store.claim('new', reserve)).claimed).toBe(true);
    expect(await store.loadSteps('live', liveToken)).toEqual({});
    expect(await store.saveStep('live', liveToken, 'charge', Buffer.from('x'))).toBe(true);
    expect(await store.loadSteps('live', liveToken)).toEqual({ charge: new Uint8Array([120]) });
    expect(await store.claim('live', reserve)).toMatchObject({
      claimed: false,
      record: { token: tokens.get('live') },
    });
    expect(await store.claim('dead', reserve)).toMatchObject({ claimed: true, attempt: 2 });
    expect(await store.claim('done', reserve)).toMatchObject({
      claimed: false,
      record: { status: 'completed' },
    });
    // A store created after the migration sends its batches through 0005's functions.
    const after = postgresStore({ pool, schema });
    const results = await after.claimMany!([
      { key: 'new', fingerprint: 'fp-c', leaseMs: 60_000 },
      { key: 'new-c', ...reserve },
    ]);
    expect(results.map((r) => r.claimed)).toEqual([false, true]);
  });

  it('keeps code older than 0005 working on a migrated table', async () => {
    // Arrange: a migrated table, and a key reserved by a crashed claim of the current code.
    const schema = fresh('mig5old');
    await migrate(pool, { schema });
    const store = postgresStore({ pool, schema });
    const crashed = await store.claim('reserved', {
      fingerprint: 'fp-a',
      leaseMs: 1,
      reserveMs: 3_600_000,
    });
    expect(crashed.claimed).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 20));
    // Act / Assert: the old functions are gone, with the error that makes old code send its statements.
    const oldClaimMany = await pool
      .query(`SELECT * FROM "${schema}".idempotency_records_claim_many($1, $2, $3)`, [
        ['x'],
        ['fp'],
        [1000],
      ])
      .catch((e) => e);
    expect(isBatchFunctionUnusable(oldClaimMany, 'idempotency_records_claim_many')).toBe(true);
    const oldCompleteClaim = await pool
      .query(
        `SELECT * FROM "${schema}".idempotency_records_complete_claim($1, $2, $3, $4, $5, $6, $7)`,
        [[], [], [], [], ['x'], ['fp'], [1000]],
      )
      .catch((e) => e);
    expect(isBatchFunctionUnusable(oldCompleteClaim, 'idempotency_records_complete_claim')).toBe(
      true,
    );
    // Old statements work on the new column (NULL): a fresh key, a live key, and a reserved dead
    // lease, which old code (knowing no reservation) takes over whatever the fingerprint.
    const held = await store.claim('held', { fingerprint: 'fp-a', leaseMs: 60_000 });
    const { rows } = await pool.query(preReservationClaimMany(schema), [
      ['fresh', 'held', 'reserved'],
      ['fp-b', 'fp-b', 'fp-b'],
      [60_000, 60_000, 60_000],
    ]);
    const byKey = new Map(rows.map((row) => [row.key as string, row]));
    expect(byKey.get('fresh')?.claimed).toBe(true);
    expect(byKey.get('held')).toMatchObject({
      claimed: false,
      token: String(held.claimed && held.token),
    });
    expect(byKey.get('reserved')?.claimed).toBe(true);
    // complete_many keeps the arguments old code calls it with (0005 replaced only its body).
    const viaOld = await store.claim('old-complete', { fingerprint: 'fp-a', leaseMs: 60_000 });
    if (!viaOld.claimed) throw new Error('expected a claim');
    expect(await store.saveStep('old-complete', viaOld.token, 'charge', Buffer.from('x'))).toBe(
      true,
    );
    const completedByOld = await pool.query(
      `SELECT * FROM "${schema}".idempotency_records_complete_many($1, $2, $3, $4)`,
      [['old-complete'], [viaOld.token], [Buffer.from('ok')], [60_000]],
    );
    expect(completedByOld.rows).toEqual([{ key: 'old-complete' }]);
    expect(await store.get('old-complete')).toMatchObject({ status: 'completed' });
    // Rows old code claimed are completed, purged and counted by the current code as any other.
    const fresh5 = Number(byKey.get('fresh')?.token);
    expect(await store.complete('fresh', fresh5, Buffer.from('ok'), 1)).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await store.purgeExpired()).toBe(1);
    expect((await store.stats()).inProgress).toBe(2);
  });

  it('bounds the batch functions’ lock waits from 0006 on, leaving the function with its grants and the records as they were', async () => {
    // Arrange: a table at 0005 with a record, and the functions' settings as 0005 left them.
    const schema = fresh('mig5');
    await migrateTo(schema, 5);
    const store = postgresStore({ pool, schema });
    const before = await store.claimMany!([
      { key: 'a', fingerprint: 'f', leaseMs: 60_000 },
      { key: 'b', fingerprint: 'f', leaseMs: 60_000 },
    ]);
    const settings = () => functionSettings(schema);
    expect(await settings()).toEqual({
      idempotency_records_claim_many: ['plan_cache_mode=force_custom_plan'],
      idempotency_records_complete_many: ['plan_cache_mode=force_custom_plan'],
      idempotency_records_complete_claim: ['plan_cache_mode=force_custom_plan'],
    });
    // Act: 0006 alone, as migrate() applies it.
    await applyMigrations(pool, schema, 6, 6);
    // Assert: claim_many and complete_claim give up a lock wait after 100 ms; complete_many still waits.
    expect(await settings()).toEqual({
      idempotency_records_claim_many: ['plan_cache_mode=force_custom_plan', 'lock_timeout=100ms'],
      idempotency_records_complete_many: ['plan_cache_mode=force_custom_plan'],
      idempotency_records_complete_claim: [
        'plan_cache_mode=force_custom_plan',
        'lock_timeout=100ms',
      ],
    });
    // The same store, started before the migration, goes on through the same functions.
    expect((await store.get('a'))?.status).toBe('in_progress');
    const tokens = before.map((result) => (result.claimed ? result.token : Number.NaN));
    expect(
      await store.completeMany!(
        ['a', 'b'].map((k, i) => ({
          key: k,
          token: tokens[i]!,
          outcome: Buffer.from('ok'),
          retentionMs: 60_000,
        })),
      ),
    ).toEqual([true, true]);
  });

  it('plans the batch functions once per connection from 0007 on, keeping their lock timeouts, grants and records', async () => {
    // Arrange: a table at 0006 whose operator set the batch lock timeout to 250 ms, with two claims.
    const schema = fresh('mig6');
    await migrateTo(schema, 6);
    await setBatchLockTimeout(pool, schema, '250ms');
    const store = postgresStore({ pool, schema });
    const before = await store.claimMany!([
      { key: 'a', fingerprint: 'f', leaseMs: 60_000 },
      { key: 'b', fingerprint: 'f', leaseMs: 60_000 },
    ]);
    const tokens = before.map((result) => (result.claimed ? result.token : Number.NaN));
    // Act
    expect((await migrate(pool, { schema })).applied).toEqual([
      '0007_generic_batch_plans',
      '0008_bounded_single_statements',
    ]);
    // Assert: one plan per connection, never a sequential scan; the operator's lock timeout stays.
    expect(await functionSettings(schema)).toEqual({
      idempotency_records_claim_many: [
        'plan_cache_mode=force_generic_plan',
        'lock_timeout=250ms',
        'enable_seqscan=off',
      ],
      // complete_many stays unbounded: its completions come after the handlers' effects.
      idempotency_records_complete_many: [
        'plan_cache_mode=force_generic_plan',
        'enable_seqscan=off',
      ],
      idempotency_records_complete_claim: [
        'plan_cache_mode=force_generic_plan',
        'lock_timeout=250ms',
      ],
      // 0008's functions, new: their own settings.
      ...SINGLE_SETTINGS,
    });
    // The same store, started before the migration, completes what it claimed before it; a retried
    // completion is answered as completed, a stale token is fenced out.
    const complete = (token: number, key = 'a') =>
      store.completeMany!([{ key, token, outcome: Buffer.from('ok'), retentionMs: 60_000 }]);
    expect(await complete(tokens[0]!)).toEqual([true]);
    expect(await complete(tokens[0]!)).toEqual([true]);
    expect(await complete(tokens[1]! - 1, 'b')).toEqual([false]);
    expect(await complete(tokens[1]!, 'b')).toEqual([true]);
    expect(await store.get('b')).toMatchObject({ status: 'completed', token: tokens[1] });
  });

  it('adds the bounded single-key functions from 0008 on, on a table in use: stores started before and after decide alike', async () => {
    // Arrange: a table at 0007 whose operator set the batch lock timeout to 250 ms, and a store that has
    // claimed on it (without the functions).
    const schema = fresh('mig7');
    await migrateTo(schema, 7);
    await setBatchLockTimeout(pool, schema, '250ms');
    const older = postgresStore({ pool, schema });
    const a = await older.claim('a', { fingerprint: 'f', leaseMs: 60_000 });
    if (!a.claimed) throw new Error('expected a claim');
    // Act
    expect((await migrate(pool, { schema })).applied).toEqual(['0008_bounded_single_statements']);
    // Assert: the functions and their bound; the batch functions keep the operator's.
    const settings = await functionSettings(schema);
    for (const [name, expected] of Object.entries(SINGLE_SETTINGS))
      expect(settings[name]).toEqual(expected);
    expect(settings.idempotency_records_claim_many).toContain('lock_timeout=250ms');
    expect(settings.idempotency_records_complete_many).not.toContain('lock_timeout=100ms');
    // Both stores decide alike on the same rows.
    const newer = postgresStore({ pool, schema });
    expect(await newer.claim('a', { fingerprint: 'f', leaseMs: 60_000 })).toMatchObject({
      claimed: false,
      record: { status: 'in_progress', fingerprint: 'f' },
    });
    expect(await newer.saveStep('a', a.token, 'charge', Buffer.from('x'))).toBe(true);
    expect(await older.loadSteps('a', a.token)).toEqual({
      charge: new Uint8Array(Buffer.from('x')),
    });
    expect(await newer.extend('a', a.token, 60_000)).toBe(true);
    expect(await newer.extend('a', a.token - 1, 60_000)).toBe(false);
    expect(await newer.complete('a', a.token, Buffer.from('ok'), 60_000)).toBe(true);
    expect(await older.complete('a', a.token, Buffer.from('ok'), 60_000)).toBe(true);
    const b = await newer.claim('b', { fingerprint: 'f', leaseMs: 60_000 });
    if (!b.claimed) throw new Error('expected a claim');
    expect(await newer.release('b', b.token - 1)).toBe(false);
    expect(await newer.release('b', b.token)).toBe(true);
    expect(await older.get('b')).toBeUndefined();
  });

  it('fails closed with StoreUnavailableError when the database is unreachable', async () => {
    const pg = await import('pg');
    const down = new pg.default.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/test' });
    down.on('error', () => {});
    try {
      const error = await migrate(down).catch((e) => e);
      expect(isStoreUnavailableError(error)).toBe(true);
    } finally {
      await down.end();
    }
  });
});
