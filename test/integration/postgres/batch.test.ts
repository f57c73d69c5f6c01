/**
 * The PostgreSQL store's batch paths beyond the conformance suite: the keys a `claim-many` statement cannot
 * settle (a blocking row committed after its snapshot) and a deadlock with an outside writer, both of which
 * fall back to one statement per key; the batch functions of migration 0003, and the statements a schema
 * without them falls back to; the completions-and-claims function of 0004 and its fallbacks.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PgQueryable, postgresStore } from '../../../src/postgres/index.js';
import { env } from '../../helpers/env.js';
import {
  type PostgresFixture,
  setBatchLockTimeout,
  setupPostgres,
  transactionClaims,
} from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
const day = 86_400_000;
const lease = { fingerprint: 'fp', leaseMs: 60_000 };
const key = (label: string) => `${label}:${randomUUID()}`;

beforeAll(async () => {
  fx = await setupPostgres('batch', { max: 4 });
  // These tests hold rows on purpose (a deadlock, a commit after a batch's snapshot) and check how a batch
  // that waits for them settles: it must wait, not give up at 0006's lock timeout on a slow machine.
  // mixed-modes.test.ts covers the timeout. (The keys a batch then claims one by one still give up after
  // claim-bounded.sql's 100 ms: the assertions hold either way. The holders claim with claim.sql, see
  // transactionClaims.)
  await setBatchLockTimeout(fx.pool, fx.schema, '30s');
});

afterAll(async () => {
  await fx.dispose();
});

/** A dedicated connection with its own deadlock_timeout (which backend detects a deadlock decides its victim). */
async function connection(deadlockTimeout: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: env.databaseUrl });
  client.on('error', () => {});
  await client.connect();
  await client.query(`SET deadlock_timeout = '${deadlockTimeout}'`);
  return client;
}

/** Resolve once a statement naming `schema` waits on a lock. */
async function waitForLockWait(schema: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const { rows } = await fx.pool.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND position($1 in query) > 0",
      [schema],
    );
    if ((rows[0] as { n: number }).n > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error('no backend started waiting on a lock');
}

describe('postgresStore claimMany', () => {
  it('settles a key whose blocking row committed after the batch statement began', async () => {
    const [free, contested] = [key('free'), key('contested')];
    const holder = await fx.pool.connect();
    try {
      await holder.query('BEGIN');
      const holderStore = transactionClaims(holder, fx.schema);
      const first = await holderStore.claim(contested, lease);
      if (!first.claimed) throw new Error('the holder must claim first');
      const store = postgresStore({ pool: fx.pool, schema: fx.schema });
      const batch = store.claimMany!([
        { key: free, ...lease },
        { key: contested, ...lease },
      ]);
      await waitForLockWait(fx.schema);
      expect(await holderStore.complete(contested, first.token, Buffer.from('done'), day)).toBe(
        true,
      );
      await holder.query('COMMIT');
      const [freeResult, contestedResult] = await batch;
      expect(freeResult?.claimed).toBe(true);
      expect(contestedResult?.claimed).toBe(false);
      if (contestedResult?.claimed === false) {
        expect(contestedResult.record.status).toBe('completed');
      }
    } finally {
      holder.release();
    }
  });

  it('falls back to one statement per key when the batch is a deadlock victim', async () => {
    // The holder inserts k2 and keeps it uncommitted; the batch inserts k1 (keys go in order) and waits on
    // k2; the holder then inserts k1 and waits on the batch: a cycle. The batch's backend has the short
    // deadlock_timeout, so it detects the cycle and is the one aborted.
    // One id for the three keys: the batch inserts in key order, and the cycle needs k1 before k2.
    const id = randomUUID();
    const [k1, k2, k3] = ['a', 'b', 'c'].map((suffix) => `deadlock:${id}:${suffix}`) as [
      string,
      string,
      string,
    ];
    const holder = await connection('10s');
    const batchClient = await connection('50ms');
    try {
      const holderStore = transactionClaims(holder, fx.schema);
      const store = postgresStore({ pool: batchClient, schema: fx.schema });
      await holder.query('BEGIN');
      expect((await holderStore.claim(k2, lease)).claimed).toBe(true);
      const batch = store.claimMany!([k3, k1, k2].map((k) => ({ key: k, ...lease })));
      await waitForLockWait(fx.schema);
      const holderOnK1 = await holderStore.claim(k1, lease);
      await holder.query('COMMIT');
      const [r3, r1, r2] = await batch;
      // Exactly one of the two claimed k1, whichever reached it first after the batch statement aborted.
      expect([holderOnK1.claimed, r1?.claimed].filter(Boolean)).toHaveLength(1);
      expect(r2?.claimed).toBe(false);
      expect(r3?.claimed).toBe(true);
      // Nothing of the aborted statement survived: k3 has exactly one claim (attempt 1).
      const record = await store.get(k3);
      expect(record?.status === 'in_progress' && record.attempt).toBe(1);
    } finally {
      await holder.end();
      await batchClient.end();
    }
  });

  it('keeps finding batch keys by the primary key after the table grows past its first statistics', async () => {
    // A batch statement kept as a prepared statement gets a generic plan after five runs, costed while the
    // table was empty: a sequential scan per batch, which then grows with the table.
    const fresh = await setupPostgres('batchplan', { max: 1 });
    const client = new pg.Client({ connectionString: env.databaseUrl });
    await client.connect();
    try {
      const store = postgresStore({ pool: client, schema: fresh.schema });
      const table = `"${fresh.schema}"."idempotency_records"`;
      const batch = async (label: string) => {
        const keys = Array.from({ length: 20 }, (_, i) => `${label}:${i}`);
        const claims = await store.claimMany!(keys.map((key) => ({ key, ...lease })));
        const done = await store.completeMany!(
          keys.map((key, i) => {
            const claim = claims[i];
            if (!claim?.claimed) throw new Error(`${key} not claimed`);
            return { key, token: claim.token, outcome: Buffer.from('ok'), retentionMs: day };
          }),
        );
        expect(done.every(Boolean)).toBe(true);
      };
      for (let i = 0; i < 8; i++) await batch(`warm${i}`);
      await client.query(
        `INSERT INTO ${table} (key, status, fingerprint, token, attempt, created_at, expires_at)
         SELECT 'bulk' || g, 'in_progress', 'fp', nextval('"${fresh.schema}"."idempotency_records_token_seq"'),
           1, now(), now() + interval '1 day'
         FROM generate_series(1, 20000) AS g`,
      );
      const seqScans = async () => {
        await client.query('SELECT pg_stat_force_next_flush()');
        const { rows } = await fresh.pool.query(
          `SELECT seq_scan FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'idempotency_records'`,
          [fresh.schema],
        );
        return Number((rows[0] as { seq_scan: string }).seq_scan);
      };
      const before = await seqScans();
      await batch('grown');
      expect(await seqScans()).toBe(before);
    } finally {
      await client.end();
      await fresh.dispose();
    }
  });
});

describe('postgresStore completeAndClaimMany (migration 0004)', () => {
  const completeClaimCall = () =>
    `SELECT * FROM "${fx.schema}"."idempotency_records_complete_claim"($1, $2, $3, $4, $5, $6, $7, $8)`;

  it('sends the completions and the claims as one call of the function', async () => {
    // Arrange
    const { db, texts } = recording(fx.pool);
    const store = postgresStore({ pool: db, schema: fx.schema });
    const [done, fresh] = [key('cc-done'), key('cc-fresh')];
    const held = await store.claim(done, lease);
    if (!held.claimed) throw new Error('not claimed');
    texts.length = 0;
    // Act
    const results = await store.completeAndClaimMany!(
      [{ key: done, token: held.token, outcome: Buffer.from('ok'), retentionMs: day }],
      [
        { key: done, ...lease },
        { key: fresh, ...lease },
      ],
    );
    // Assert: one statement; the claim of the completed key saw the completion.
    expect(texts).toEqual([completeClaimCall()]);
    expect(results.completed).toEqual([true]);
    expect(results.claimed[0]).toMatchObject({ claimed: false, record: { status: 'completed' } });
    expect(results.claimed[1]?.claimed).toBe(true);
  });

  it('falls back to the two batch calls on a schema without the function, once', async () => {
    // Arrange: a schema as 0003 left it.
    const old = await setupPostgres('batch3', { max: 2 });
    try {
      await old.pool.query(`DROP FUNCTION "${old.schema}"."idempotency_records_complete_claim"`);
      const { db, texts } = recording(old.pool);
      const store = postgresStore({ pool: db, schema: old.schema });
      const [a, b] = [key('old3-a'), key('old3-b')];
      const claims = await store.claimMany!([a, b].map((k) => ({ key: k, ...lease })));
      texts.length = 0;
      // Act: twice, each completing one key and claiming one.
      const tokenOf = (index: number) => {
        const claim = claims[index];
        if (!claim?.claimed) throw new Error('not claimed');
        return claim.token;
      };
      const first = await store.completeAndClaimMany!(
        [{ key: a, token: tokenOf(0), outcome: Buffer.from('a'), retentionMs: day }],
        [{ key: key('old3-c'), ...lease }],
      );
      const second = await store.completeAndClaimMany!(
        [{ key: b, token: tokenOf(1), outcome: Buffer.from('b'), retentionMs: day }],
        [{ key: a, ...lease }],
      );
      // Assert: one refused call, then the two batches; results as from the function.
      expect(texts.filter((t) => t.includes('_complete_claim"('))).toHaveLength(1);
      // A completion of one key goes alone: through complete_one (migration 0008).
      expect(
        texts.filter(
          (t) =>
            t.includes('_complete_many"(') ||
            t.includes('_complete_one"(') ||
            t.includes('-- complete'),
        ),
      ).toHaveLength(2);
      expect(first.completed).toEqual([true]);
      expect(first.claimed[0]?.claimed).toBe(true);
      expect(second.completed).toEqual([true]);
      expect(second.claimed[0]).toMatchObject({ claimed: false, record: { status: 'completed' } });
    } finally {
      await old.dispose();
    }
  });

  it('sends a list that repeats a key as the two batches, which settle repeats in order', async () => {
    const { db, texts } = recording(fx.pool);
    const store = postgresStore({ pool: db, schema: fx.schema });
    const k = key('cc-repeat');
    const results = await store.completeAndClaimMany!(
      [],
      [
        { key: k, ...lease },
        { key: k, fingerprint: 'other', leaseMs: 60_000 },
      ],
    );
    expect(texts.some((t) => t.includes('_complete_claim"('))).toBe(false);
    expect(results.claimed[0]?.claimed).toBe(true);
    expect(results.claimed[1]).toMatchObject({ claimed: false, record: { fingerprint: 'fp' } });
  });

  it('applies nothing of a call chosen as a deadlock victim, then sends the two batches', async () => {
    // As for claimMany: the holder keeps k2 uncommitted; the call completes `done` and claims k1 then
    // waits on k2; the holder then claims k1 and waits on the call. The call's backend has the short
    // deadlock_timeout, so it is the one aborted, completion included, and the store resends both lists.
    const id = randomUUID();
    const [k1, k2, k3] = ['a', 'b', 'c'].map((suffix) => `ccdead:${id}:${suffix}`) as [
      string,
      string,
      string,
    ];
    const done = key('ccdead-done');
    const holder = await connection('10s');
    const callClient = await connection('50ms');
    try {
      const holderStore = transactionClaims(holder, fx.schema);
      const { db, texts } = recording(callClient);
      const store = postgresStore({ pool: db, schema: fx.schema });
      const held = await store.claim(done, lease);
      if (!held.claimed) throw new Error('not claimed');
      await holder.query('BEGIN');
      expect((await holderStore.claim(k2, lease)).claimed).toBe(true);
      texts.length = 0;
      const call = store.completeAndClaimMany!(
        [{ key: done, token: held.token, outcome: Buffer.from('ok'), retentionMs: day }],
        [k3, k1, k2].map((k) => ({ key: k, ...lease })),
      );
      await waitForLockWait(fx.schema);
      const holderOnK1 = await holderStore.claim(k1, lease);
      await holder.query('COMMIT');
      const { completed, claimed } = await call;
      const [r3, r1, r2] = claimed;
      // Assert: the aborted call was resent as the two batches, and each item applied once.
      expect(texts[0]).toBe(completeClaimCall());
      expect(texts.some((t) => t.includes('_claim_many"('))).toBe(true);
      expect(completed).toEqual([true]);
      expect([holderOnK1.claimed, r1?.claimed].filter(Boolean)).toHaveLength(1);
      expect(r2?.claimed).toBe(false);
      expect(r3?.claimed).toBe(true);
      const record = await store.get(k3);
      expect(record?.status === 'in_progress' && record.attempt).toBe(1);
      expect((await store.get(done))?.status).toBe('completed');
    } finally {
      await holder.end();
      await callClient.end();
    }
  });
});

/** `fx.pool` behind a wrapper that records the text of every statement sent through it. */
function recording(pool: PgQueryable): { db: PgQueryable; texts: string[] } {
  const texts: string[] = [];
  const db: PgQueryable = {
    query(text, values) {
      texts.push(text);
      return pool.query(text, values);
    },
  };
  return { db, texts };
}

/** Claim then complete `keys` as two batches; every key must be claimed and completed. */
async function claimAndComplete(store: ReturnType<typeof postgresStore>, keys: string[]) {
  const claims = await store.claimMany!(keys.map((k) => ({ key: k, ...lease })));
  const done = await store.completeMany!(
    keys.map((k, i) => {
      const claim = claims[i];
      if (!claim?.claimed) throw new Error(`${k} not claimed`);
      return { key: k, token: claim.token, outcome: Buffer.from('ok'), retentionMs: day };
    }),
  );
  expect(done).toEqual(keys.map(() => true));
}

describe('postgresStore batch functions (migration 0003)', () => {
  it('sends claimMany and completeMany through the functions on a migrated schema', async () => {
    // Arrange
    const { db, texts } = recording(fx.pool);
    const store = postgresStore({ pool: db, schema: fx.schema });
    // Act
    await claimAndComplete(store, [key('fn-a'), key('fn-b'), key('fn-c')]);
    // Assert
    expect(texts).toEqual([
      `SELECT * FROM "${fx.schema}"."idempotency_records_claim_many"($1, $2, $3, $4)`,
      `SELECT * FROM "${fx.schema}"."idempotency_records_complete_many"($1, $2, $3, $4)`,
    ]);
  });

  it('falls back to the batch statements on a schema without the functions, once, and stays correct', async () => {
    // Arrange: a schema as 0002 left it.
    const old = await setupPostgres('batchold', { max: 2 });
    try {
      await old.pool.query(`DROP FUNCTION "${old.schema}"."idempotency_records_claim_many"`);
      await old.pool.query(`DROP FUNCTION "${old.schema}"."idempotency_records_complete_many"`);
      const { db, texts } = recording(old.pool);
      const store = postgresStore({ pool: db, schema: old.schema });
      const live = key('live');
      const held = await store.claim(live, lease);
      texts.length = 0;
      // Act
      await claimAndComplete(store, [key('old-a'), key('old-b')]);
      const second = await store.claimMany!([
        { key: live, ...lease },
        { key: key('old-c'), ...lease },
      ]);
      // Assert: one failed function call, then the statements for good; a live key is still reported.
      expect(texts.filter((t) => t.includes('_claim_many"('))).toHaveLength(1);
      expect(texts.filter((t) => t.includes('_complete_many"('))).toHaveLength(0);
      expect(texts.filter((t) => t.startsWith('-- claim-many'))).toHaveLength(2);
      expect(texts.filter((t) => t.startsWith('-- complete-many'))).toHaveLength(1);
      expect(second[0]).toMatchObject({
        claimed: false,
        record: { token: held.claimed && held.token },
      });
      expect(second[1]?.claimed).toBe(true);
    } finally {
      await old.dispose();
    }
  });

  it('falls back to the statements for a role that may not execute the functions', async () => {
    // Arrange: EXECUTE revoked from PUBLIC, and a serving role with only the table's privileges.
    const role = `ik_noexec_${randomUUID().slice(0, 8)}`;
    const table = `"${fx.schema}"."idempotency_records"`;
    const fn = (name: string) => `"${fx.schema}"."idempotency_records_${name}"`;
    await fx.pool.query(`CREATE ROLE ${role} LOGIN`);
    await fx.pool.query(`GRANT USAGE ON SCHEMA "${fx.schema}" TO ${role}`);
    await fx.pool.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ${table} TO ${role}`);
    await fx.pool.query(
      `GRANT USAGE ON SEQUENCE "${fx.schema}"."idempotency_records_token_seq" TO ${role}`,
    );
    await fx.pool.query(
      `REVOKE EXECUTE ON FUNCTION ${fn('claim_many')}(text[], text[], float8[], float8[]) FROM PUBLIC`,
    );
    await fx.pool.query(
      `REVOKE EXECUTE ON FUNCTION ${fn('complete_many')}(text[], bigint[], bytea[], float8[]) FROM PUBLIC`,
    );
    const url = new URL(env.databaseUrl);
    url.username = role;
    const rolePool = new pg.Pool({ connectionString: url.toString(), max: 2 });
    try {
      const { db, texts } = recording(rolePool);
      const store = postgresStore({ pool: db, schema: fx.schema });
      // Act
      await claimAndComplete(store, [key('role-a'), key('role-b')]);
      // Assert: one refused call, then the statements.
      expect(texts.filter((t) => t.includes('_claim_many"('))).toHaveLength(1);
      expect(texts.filter((t) => t.startsWith('-- claim-many'))).toHaveLength(1);
      expect(texts.filter((t) => t.startsWith('-- complete-many'))).toHaveLength(1);
    } finally {
      await rolePool.end();
      await fx.pool.query(
        `GRANT EXECUTE ON FUNCTION ${fn('claim_many')}(text[], text[], float8[], float8[]) TO PUBLIC`,
      );
      await fx.pool.query(
        `GRANT EXECUTE ON FUNCTION ${fn('complete_many')}(text[], bigint[], bytea[], float8[]) TO PUBLIC`,
      );
      await fx.pool.query(`DROP OWNED BY ${role}`);
      await fx.pool.query(`DROP ROLE ${role}`);
    }
  });

  it('does not fall back when the error is not a missing function of its own', async () => {
    // Arrange: an error of the batch's own, raised by the server for the function's call (a storage key
    // with a NUL character, which a PostgreSQL text value cannot hold; fingerprints with one are stored as
    // a digest, see fingerprint-text.test.ts).
    const { db, texts } = recording(fx.pool);
    const store = postgresStore({ pool: db, schema: fx.schema });
    // Act
    const failed = store.claimMany!([
      { key: `${key('bad-a')}\u0000`, ...lease },
      { key: key('bad-b'), ...lease },
    ]);
    await expect(failed).rejects.toMatchObject({ code: 'store_unavailable' });
    await claimAndComplete(store, [key('after-a'), key('after-b')]);
    // Assert: the failed batch was the function's, and the next ones still use the functions.
    expect(texts.map((t) => t.slice(0, 60))).toEqual(
      [
        `SELECT * FROM "${fx.schema}"."idempotency_records_claim_many"(`,
        `SELECT * FROM "${fx.schema}"."idempotency_records_claim_many"(`,
        `SELECT * FROM "${fx.schema}"."idempotency_records_complete_many"(`,
      ].map((t) => t.slice(0, 60)),
    );
  });
});
