/**
 * Recorded steps (`saveStep`, `loadSteps`) in the PostgreSQL store, beyond the conformance checks: how the
 * `steps` column of migration 0005 holds them (a jsonb object of base64 values plus the '#' member, the
 * fingerprint they belong to), and when it is kept or cleared on every path that claims or completes —
 * the single statements, the batch functions, the batch statements a schema without the functions falls
 * back to, the completions-and-claims function, extend, release, the transactional mode — and the rows
 * a process running code older than 0005 leaves behind.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ClaimResult, createFingerprint, isInvalidOptionsError } from '../../../src/index.js';
import { renderSql, tableNames } from '../../../src/postgres/identifiers.js';
import {
  type PgQueryable,
  type PostgresStore,
  postgresStore,
  postgresTransactional,
} from '../../../src/postgres/index.js';
import { migrations } from '../../../src/postgres/migrations.gen.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
const day = 86_400_000;
const key = (label: string) => `${label}:${randomUUID()}`;
const bytes = (text: string) => new Uint8Array(Buffer.from(text));

beforeAll(async () => {
  fx = await setupPostgres('steps', { max: 4 });
});

afterAll(async () => {
  await fx.dispose();
});

/** The `steps` column of `k`'s row as stored (`undefined`: no row). */
async function column(k: string): Promise<Record<string, string> | null | undefined> {
  const { rows } = await fx.pool.query(
    `SELECT steps FROM "${fx.schema}".idempotency_records WHERE key = $1`,
    [k],
  );
  return rows[0]?.steps;
}

/**
 * A client on the fixture's pool on which the batch functions look missing (42883, as on a schema before
 * 0003), so the store sends the batch statements, `claim-many.sql` and `complete-many.sql`. Records the
 * statements it runs.
 */
function withoutFunctions(): { db: PgQueryable; texts: string[] } {
  const texts: string[] = [];
  const db: PgQueryable = {
    query(text, values) {
      if (/_(claim_many|complete_many|complete_claim)"\(/.test(text)) {
        const error = Object.assign(new Error(`function ${text} does not exist`), {
          code: '42883',
        });
        return Promise.reject(error);
      }
      texts.push(text);
      return fx.pool.query(text, values);
    },
  };
  return { db, texts };
}

/** Claim `k` with a lease of `leaseMs` (no reservation unless given); it must be claimed. */
async function claimed(store: PostgresStore, k: string, fingerprint: string, leaseMs = 60_000) {
  const result = await store.claim(k, { fingerprint, leaseMs });
  if (!result.claimed) throw new Error(`claim of ${k} lost`);
  return result;
}

describe('postgresStore steps: the column', () => {
  it('holds one jsonb member per name, base64 values, and the fingerprint as "#"', async () => {
    // Arrange
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const k = key('column');
    const held = await claimed(store, k, 'fp-col');
    const binary = Uint8Array.from({ length: 65_536 }, (_, i) => (i * 7 + (i >> 8)) % 256);
    // A view into a larger buffer: only its own bytes are recorded.
    const view = new Uint8Array([9, 1, 2, 3, 9]).subarray(1, 4);
    const names = [
      'ship.v2:eu-1_x',
      'a.b.c',
      '__proto__',
      'constructor',
      '0',
      '-',
      'x'.repeat(100),
    ];
    // Act
    for (const name of names)
      expect(await store.saveStep(k, held.token, name, bytes(name))).toBe(true);
    expect(await store.saveStep(k, held.token, 'binary', binary)).toBe(true);
    expect(await store.saveStep(k, held.token, 'view', view)).toBe(true);
    expect(await store.saveStep(k, held.token, 'empty', new Uint8Array())).toBe(true);
    // Assert: the stored object.
    const stored = await column(k);
    expect(Object.keys(stored ?? {}).sort()).toEqual(
      ['#', ...names, 'binary', 'view', 'empty'].sort(),
    );
    expect(stored?.['#']).toBe('fp-col');
    expect(stored?.view).toBe(Buffer.from([1, 2, 3]).toString('base64'));
    expect(stored?.['a.b.c']).toBe(Buffer.from('a.b.c').toString('base64'));
    // Assert: loaded back byte for byte, every name an own property, '#' not a step.
    const steps = await store.loadSteps(k, held.token);
    expect(Object.keys(steps ?? {}).sort()).toEqual([...names, 'binary', 'view', 'empty'].sort());
    for (const name of names) {
      expect(Object.hasOwn(steps ?? {}, name)).toBe(true);
      expect(Buffer.from(steps?.[name] as Uint8Array).toString()).toBe(name);
    }
    expect(Buffer.compare(Buffer.from(steps?.binary as Uint8Array), Buffer.from(binary))).toBe(0);
    expect(steps?.view).toEqual(new Uint8Array([1, 2, 3]));
    expect(steps?.empty).toEqual(new Uint8Array());
    expect(steps?.binary).toBeInstanceOf(Uint8Array);
    await store.delete(k);
  });

  it('refuses a name outside [A-Za-z0-9._:-]{1,100} before sending anything', async () => {
    // Arrange
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const k = key('names');
    const held = await claimed(store, k, 'fp');
    // Act / Assert
    for (const name of ['#', '', 'x'.repeat(101), 'a"b', "a'b", 'a b', 'a/b']) {
      const error = await store.saveStep(k, held.token, name, bytes('x')).catch((e) => e);
      expect(isInvalidOptionsError(error)).toBe(true);
    }
    expect(await column(k)).toBeNull();
    await store.delete(k);
  });

  it('keeps steps through an extension and until the lease ends, then fences both calls', async () => {
    // Arrange
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const k = key('extend');
    const held = await claimed(store, k, 'fp', 300);
    expect(await store.saveStep(k, held.token, 'a', bytes('1'))).toBe(true);
    // Act
    expect(await store.extend(k, held.token, 600)).toBe(true);
    await sleep(400);
    // Assert: still held (the extension), steps intact; then the lease ends.
    expect(await store.loadSteps(k, held.token)).toEqual({ a: bytes('1') });
    await sleep(400);
    expect(await store.loadSteps(k, held.token)).toBeUndefined();
    expect(await store.saveStep(k, held.token, 'b', bytes('2'))).toBe(false);
    expect(Object.keys((await column(k)) ?? {}).sort()).toEqual(['#', 'a']);
    await store.delete(k);
  });
});

describe('postgresStore steps: takeovers', () => {
  /**
   * Two crashed claims with a step each, `same` to be taken over by its own fingerprint and `other` by
   * another (no reservation, so it may be); `take` takes both over and returns the new tokens.
   */
  async function takeoverCase(
    store: PostgresStore,
    label: string,
    take: (same: string, other: string) => Promise<{ same: number; other: number }>,
  ) {
    const [same, other] = [key(`${label}-same`), key(`${label}-other`)];
    for (const k of [same, other]) {
      const crashed = await claimed(store, k, 'fp-a', 50);
      expect(await store.saveStep(k, crashed.token, 'charge', bytes(`ch:${k}`))).toBe(true);
    }
    await sleep(120);
    const tokens = await take(same, other);
    expect(await store.loadSteps(same, tokens.same)).toEqual({ charge: bytes(`ch:${same}`) });
    expect(await store.loadSteps(other, tokens.other)).toEqual({});
    expect(await column(other)).toBeNull();
    for (const k of [same, other]) await store.delete(k);
  }

  const tokenOf = (result: ClaimResult | undefined) => {
    if (!result?.claimed) throw new Error('expected a claim');
    return result.token;
  };

  it('by the single claim statement', async () => {
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    await takeoverCase(store, 'single', async (same, other) => ({
      same: (await claimed(store, same, 'fp-a')).token,
      other: (await claimed(store, other, 'fp-b')).token,
    }));
  });

  it('by the claim_many function', async () => {
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    await takeoverCase(store, 'fn', async (same, other) => {
      const [a, b] = await store.claimMany!([
        { key: same, fingerprint: 'fp-a', leaseMs: 60_000 },
        { key: other, fingerprint: 'fp-b', leaseMs: 60_000 },
      ]);
      return { same: tokenOf(a), other: tokenOf(b) };
    });
  });

  it('by the claim-many statement, on a schema without the functions', async () => {
    const { db, texts } = withoutFunctions();
    const store = postgresStore({ pool: db, schema: fx.schema });
    await takeoverCase(store, 'stmt', async (same, other) => {
      const [a, b] = await store.claimMany!([
        { key: same, fingerprint: 'fp-a', leaseMs: 60_000 },
        { key: other, fingerprint: 'fp-b', leaseMs: 60_000 },
      ]);
      return { same: tokenOf(a), other: tokenOf(b) };
    });
    expect(texts.filter((t) => t.startsWith('-- claim-many'))).toHaveLength(1);
  });

  it('by the complete_claim function', async () => {
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    await takeoverCase(store, 'cc', async (same, other) => {
      const { claimed: results } = await store.completeAndClaimMany!(
        [],
        [
          { key: same, fingerprint: 'fp-a', leaseMs: 60_000 },
          { key: other, fingerprint: 'fp-b', leaseMs: 60_000 },
        ],
      );
      return { same: tokenOf(results[0]), other: tokenOf(results[1]) };
    });
  });

  it('keeps them across two takeovers, each adding its own', async () => {
    // Arrange
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const k = key('twice');
    const first = await claimed(store, k, 'fp', 50);
    await store.saveStep(k, first.token, 'one', bytes('1'));
    await sleep(120);
    const second = await claimed(store, k, 'fp', 50);
    await store.saveStep(k, second.token, 'two', bytes('2'));
    await sleep(120);
    // Act
    const third = await claimed(store, k, 'fp');
    // Assert
    expect(third.attempt).toBe(3);
    expect(await store.loadSteps(k, third.token)).toEqual({ one: bytes('1'), two: bytes('2') });
    await store.delete(k);
  });
});

describe('postgresStore steps: completions and releases', () => {
  async function heldWithStep(store: PostgresStore, label: string) {
    const k = key(label);
    const held = await claimed(store, k, 'fp');
    expect(await store.saveStep(k, held.token, 'charge', bytes('ch'))).toBe(true);
    return { k, token: held.token };
  }

  it('clears the column on every completion path', async () => {
    // Arrange
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const { db } = withoutFunctions();
    const fallback = postgresStore({ pool: db, schema: fx.schema });
    const single = await heldWithStep(store, 'c-single');
    const fn = [await heldWithStep(store, 'c-fn1'), await heldWithStep(store, 'c-fn2')];
    const stmt = [await heldWithStep(store, 'c-st1'), await heldWithStep(store, 'c-st2')];
    const cc = [await heldWithStep(store, 'c-cc1'), await heldWithStep(store, 'c-cc2')];
    const done = ({ k, token }: { k: string; token: number }) => ({
      key: k,
      token,
      outcome: bytes('ok'),
      retentionMs: day,
    });
    // Act
    expect(await store.complete(single.k, single.token, bytes('ok'), day)).toBe(true);
    expect(await store.completeMany!(fn.map(done))).toEqual([true, true]);
    expect(await fallback.completeMany!(stmt.map(done))).toEqual([true, true]);
    expect((await store.completeAndClaimMany!(cc.map(done), [])).completed).toEqual([true, true]);
    // Assert
    for (const { k, token } of [single, ...fn, ...stmt, ...cc]) {
      expect(await column(k)).toBeNull();
      expect(await store.get(k)).toMatchObject({ status: 'completed', token });
      await store.delete(k);
    }
  });

  it('drops them with the row on release, so the next claim of the same request starts afresh', async () => {
    // Arrange
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const { k, token } = await heldWithStep(store, 'release');
    // Act
    expect(await store.release(k, token)).toBe(true);
    // Assert
    expect(await column(k)).toBeUndefined();
    const again = await claimed(store, k, 'fp');
    expect(await store.loadSteps(k, again.token)).toEqual({});
    await store.delete(k);
  });

  it('the transactional mode takes a crashed claim over with its steps and clears them on commit, or rolls back to them', async () => {
    // Arrange: a crashed engine claim of the same request, with a step recorded.
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const clientKey = key('tx');
    const k = tx.storageKeyFor(clientKey);
    const fingerprint = createFingerprint({ amount: 1 });
    const crashed = await store.claim(k, { fingerprint, leaseMs: 50, reserveMs: day });
    if (!crashed.claimed) throw new Error('expected a claim');
    expect(await store.saveStep(k, crashed.token, 'charge', bytes('ch'))).toBe(true);
    await sleep(120);
    // Act: a run that fails (rolled back), then one that commits.
    const failed = await tx
      .runInTransaction({ key: clientKey, payload: { amount: 1 } }, async (ctx) => {
        const { rows } = await ctx.query<{ steps: Record<string, string> | null }>(
          `SELECT steps FROM "${fx.schema}".idempotency_records WHERE key = $1`,
          [k],
        );
        expect(rows[0]?.steps?.charge).toBe(Buffer.from('ch').toString('base64'));
        throw new Error('boom');
      })
      .catch((e) => e);
    // Assert: the crashed claim and its steps are back.
    expect((failed as Error).message).toBe('boom');
    expect((await column(k))?.charge).toBe(Buffer.from('ch').toString('base64'));
    const outcome = await tx.runInTransaction({ key: clientKey, payload: { amount: 1 } }, () => 1);
    expect(outcome).toMatchObject({ status: 'executed', attempt: 2 });
    expect(await column(k)).toBeNull();
    await store.delete(k);
  });
});

describe('postgresStore steps: rows written by code older than migration 0005', () => {
  /** 0003's claim-many, the statement old code sends once it finds 0005 dropped its functions. */
  const oldClaimMany = () => {
    const text = migrations.find((m) => m.id === 3)?.sql ?? '';
    const body = text.slice(text.indexOf('  WITH input AS'), text.indexOf('  FROM blocking;'));
    return renderSql(`${body}  FROM blocking;`, tableNames(fx.schema));
  };

  it('neither returns nor keeps the steps another request left on a row old code took over', async () => {
    // Arrange: a crashed claim with a step; old code (which ignores the reservation and knows no steps)
    // takes the row over for another request, which crashes too.
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const k = key('old');
    // A lease long enough for the step to be saved on a loaded machine, then waited out.
    const crashed = await store.claim(k, { fingerprint: 'fp-a', leaseMs: 500, reserveMs: day });
    if (!crashed.claimed) throw new Error('expected a claim');
    expect(await store.saveStep(k, crashed.token, 'charge', bytes('for a'))).toBe(true);
    await sleep(600);
    const { rows } = await fx.pool.query(oldClaimMany(), [[k], ['fp-b'], [50]]);
    expect(rows[0]).toMatchObject({ claimed: true, attempt: 2 });
    expect((await column(k))?.['#']).toBe('fp-a');
    await sleep(120);
    // Act: the current code takes it over for fp-b, the request old code ran.
    const next = await store.claim(k, { fingerprint: 'fp-b', leaseMs: 60_000 });
    if (!next.claimed) throw new Error('expected a takeover');
    // Assert: fp-a's step is not fp-b's; the first save starts fp-b's own.
    expect(next.attempt).toBe(3);
    expect(await store.loadSteps(k, next.token)).toEqual({});
    expect(await store.saveStep(k, next.token, 'ship', bytes('for b'))).toBe(true);
    expect(await column(k)).toEqual({ '#': 'fp-b', ship: Buffer.from('for b').toString('base64') });
    expect(await store.loadSteps(k, next.token)).toEqual({ ship: bytes('for b') });
    await store.delete(k);
  });

  it('starts a claim of a completed row afresh even when old code left its steps on it', async () => {
    // Arrange: a completion that does not clear the column, as old code's complete.sql.
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const k = key('oldcomplete');
    const held = await claimed(store, k, 'fp');
    expect(await store.saveStep(k, held.token, 'charge', bytes('ch'))).toBe(true);
    await fx.pool.query(
      `UPDATE "${fx.schema}".idempotency_records
       SET status = 'completed', outcome = '\\x00', completed_at = now(), expires_at = now()
       WHERE key = $1`,
      [k],
    );
    // Act
    const next = await claimed(store, k, 'fp');
    // Assert
    expect(next.attempt).toBe(1);
    expect(await store.loadSteps(k, next.token)).toEqual({});
    expect(await column(k)).toBeNull();
    await store.delete(k);
  });
});
