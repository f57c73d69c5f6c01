/**
 * The PostgreSQL store's claim sent alone, without a server: it goes through migration 0008's `claim_one`,
 * or `claim-bounded.sql` (claim.sql with a 100 ms transaction-local lock timeout set first) on a schema
 * without it; a lock timeout on a row answers the key in progress for `busyRetryAfterMs`, one on the table
 * is the store unavailable; and the transactional mode keeps claim.sql, whose wait its own `lockTimeoutMs`
 * governs. The waits themselves are checked against a real server in
 * `test/integration/postgres/mixed-modes.test.ts` and `table-lock-timeout.test.ts`.
 */
import { describe, expect, it } from 'vitest';
import { isStoreUnavailableError } from '../../../src/index.js';
import { renderSql, tableNames } from '../../../src/postgres/identifiers.js';
import {
  type PgPool,
  type PgPoolClient,
  type PgQueryable,
  postgresStore,
  postgresTransactional,
} from '../../../src/postgres/index.js';
import * as sql from '../../../src/postgres/sql.gen.js';
import { bareSql } from '../../helpers/bare-sql.js';

const lease = { fingerprint: 'fp', leaseMs: 1000 };
const claimText = renderSql(sql.claim, tableNames());
const boundedText = renderSql(sql.claimBounded, tableNames());
const claimOneText = 'SELECT * FROM "public"."idempotency_records_claim_one"($1, $2, $3, $4)';
/** The context PostgreSQL gives a wait for a row another transaction holds. */
const rowWait = 'while inserting index tuple (0,1) in relation "idempotency_records"';

/** A PostgreSQL error as node-postgres rejects with it, with its context (`where`) when it has one. */
function pgError(code: string, where?: string): Error {
  return Object.assign(new Error(`error ${code}`), { code, where });
}

/**
 * A client that records the text of every statement and answers it with `answer(text, values)`: by
 * default one claimed row for a claim, no row for anything else.
 */
function recording(
  answer: (text: string, values: unknown[]) => unknown[] = (text) =>
    text.includes('INSERT INTO') || text.includes('_claim_one"(')
      ? [{ claimed: true, token: '7', attempt: 1, expires_at_ms: 1 }]
      : [],
): PgQueryable & { texts: string[] } {
  const texts: string[] = [];
  return {
    texts,
    async query(text, values = []) {
      texts.push(text);
      const rows = answer(text, values);
      return { rows, rowCount: rows.length, command: text.split(' ')[0] ?? '' };
    },
  };
}

describe('claim-bounded.sql', () => {
  it('is claim.sql with a 100 ms transaction-local lock_timeout set before the INSERT has its row', () => {
    // Arrange: the three edits that make the bounded statement, applied to claim.sql.
    const expected = bareSql(sql.claim)
      .replace(
        'WITH claimed AS (',
        "WITH bounded AS MATERIALIZED (\nSELECT set_config('lock_timeout', '100ms', true)\n),\nclaimed AS (",
      )
      .replace('\nVALUES ($1,', '\nSELECT $1,')
      .replace(' END)\nON CONFLICT (key)', ' END\nFROM bounded\nON CONFLICT (key)');
    // Act
    const bounded = bareSql(sql.claimBounded);
    // Assert: nothing else differs, so both decide a claim alike (and return no row alike).
    expect(expected).not.toBe(bareSql(sql.claim));
    expect(bounded).toBe(expected);
  });

  it('names the table within the first kilobyte, which pg_stat_activity shows', () => {
    // Act
    const position = sql.claimBounded.indexOf('INSERT INTO {{table}}');
    // Assert: room left for a long schema and table name.
    expect(position).toBeGreaterThan(0);
    expect(position).toBeLessThan(1024 - 2 * 64 - 20);
  });
});

describe('postgresStore claim sent alone', () => {
  it('sends the claim_one function of migration 0008, with claim.sql’s parameters', async () => {
    // Arrange
    const db = recording();
    const store = postgresStore({ pool: db });
    // Act
    const result = await store.claim('k', lease);
    // Assert
    expect(db.texts).toEqual([claimOneText]);
    expect(result).toEqual({ claimed: true, token: 7, attempt: 1, leaseUntil: 1 });
  });

  it('sends claim-bounded.sql instead, for the life of the store, on a schema without claim_one', async () => {
    // Arrange: a schema migrated up to 0007 (42883, naming the function).
    const missing = Object.assign(
      new Error(
        'function public.idempotency_records_claim_one(unknown, unknown, integer, integer) does not exist',
      ),
      { code: '42883' },
    );
    const db = recording((text) => {
      if (text.includes('_claim_one"(')) throw missing;
      return [{ claimed: true, token: '7', attempt: 1, expires_at_ms: 1 }];
    });
    const store = postgresStore({ pool: db });
    // Act
    const first = await store.claim('k', lease);
    const second = await store.claim('k2', lease);
    // Assert
    expect(db.texts).toEqual([claimOneText, boundedText, boundedText]);
    expect(first).toMatchObject({ claimed: true, token: 7 });
    expect(second).toMatchObject({ claimed: true, token: 7 });
  });

  it('answers a lock timeout (55P03) on a row another transaction holds as in progress, retry after busyRetryAfterMs, with no token', async () => {
    // Arrange
    const db = recording(() => {
      throw pgError('55P03', rowWait);
    });
    const store = postgresStore({ pool: db, busyRetryAfterMs: 3000 });
    const before = Date.now();
    // Act
    const result = await store.claim('k', lease);
    // Assert
    expect(result).toMatchObject({
      claimed: false,
      record: { status: 'in_progress', fingerprint: 'fp', token: 0, attempt: 1 },
    });
    const leaseUntil = result.claimed ? 0 : (result.record as { leaseUntil: number }).leaseUntil;
    expect(leaseUntil).toBeGreaterThanOrEqual(before + 3000);
    expect(leaseUntil).toBeLessThanOrEqual(Date.now() + 3000);
  });

  const unnamedWaits = [
    ['a top-level statement (no context)', undefined],
    [
      'the claim_one function (its own line only)',
      'PL/pgSQL function public.idempotency_records_claim_one(text,text,double precision,double precision) line 3 at RETURN QUERY',
    ],
  ] as const;

  /**
   * A client on which every claim times out waiting for a lock it names no row for, and the look-up of the
   * table's locks (blocking-table-lock.sql) answers `blocked`.
   */
  function unnamedWait(where: string | undefined, blocked: boolean | Error) {
    return recording((text) => {
      if (text === sql.blockingTableLock) {
        if (blocked instanceof Error) throw blocked;
        return [{ blocked }];
      }
      throw pgError('55P03', where);
    });
  }

  it.each(unnamedWaits)(
    'answers a lock timeout, from %s, as the store unavailable when another session locks the table',
    async (_, where) => {
      // Arrange: an ALTER TABLE, LOCK TABLE or VACUUM FULL holds the table: PostgreSQL names no row.
      const db = unnamedWait(where, true);
      const store = postgresStore({ pool: db });
      // Act
      const error = await store.claim('k', lease).catch((e: unknown) => e);
      // Assert: looked up once, after the claim.
      expect(isStoreUnavailableError(error)).toBe(true);
      expect((error as Error).message).toMatch(/lock timeout.*see pg_locks/);
      expect(db.texts).toEqual([claimOneText, sql.blockingTableLock]);
    },
  );

  it.each(unnamedWaits)(
    'answers a lock timeout, from %s, as in progress when nothing locks the table (a row’s tuple lock)',
    async (_, where) => {
      // Arrange: claims of one key queued on its row's tuple lock: PostgreSQL names no row either.
      const store = postgresStore({ pool: unnamedWait(where, false) });
      // Act
      const result = await store.claim('k', lease);
      // Assert
      expect(result).toMatchObject({ claimed: false, record: { status: 'in_progress', token: 0 } });
    },
  );

  it('fails closed when the table’s locks cannot be looked up', async () => {
    // Arrange
    const store = postgresStore({ pool: unnamedWait(undefined, new Error('connection lost')) });
    // Act
    const error = await store.claim('k', lease).catch((e: unknown) => e);
    // Assert: the claim's own error.
    expect(isStoreUnavailableError(error)).toBe(true);
    expect((error as Error).message).toMatch(/lock timeout/);
  });

  it('still fails closed on any other error', async () => {
    // Arrange
    const db = recording(() => {
      throw pgError('57014');
    });
    const store = postgresStore({ pool: db });
    // Act
    const error = await store.claim('k', lease).catch((e: unknown) => e);
    // Assert
    expect(isStoreUnavailableError(error)).toBe(true);
  });

  it('claims a key a batch left unsettled with claim_one too', async () => {
    // Arrange: the batch function settles 'a' and leaves 'b' (its blocking row committed after the
    // batch's snapshot), which the store claims again on its own.
    const db = recording((text, values) => {
      if (text.includes('_claim_many"(')) {
        return [{ key: 'a', claimed: true, token: '1', attempt: 1, expires_at_ms: 1 }];
      }
      expect(values[0]).toBe('b');
      throw pgError('55P03', rowWait);
    });
    const store = postgresStore({ pool: db, busyRetryAfterMs: 2000 });
    // Act
    const results = await store.claimMany?.([
      { key: 'a', ...lease },
      { key: 'b', ...lease },
    ]);
    // Assert
    expect(db.texts.slice(1)).toEqual([claimOneText]);
    expect(results).toMatchObject([
      { claimed: true, token: 1 },
      { claimed: false, record: { status: 'in_progress', token: 0 } },
    ]);
  });
});

describe('postgresTransactional claim', () => {
  it('claims with claim.sql, which sets no lock_timeout that would outlive it in the transaction', async () => {
    // Arrange: a pool whose one connection answers BEGIN, the claim, the completion and COMMIT.
    const connection = recording((text) => {
      if (text.includes('INSERT INTO')) {
        return [{ claimed: true, token: '7', attempt: 1, expires_at_ms: 1 }];
      }
      return text.includes('UPDATE') ? [{ ok: true }] : [];
    });
    const client: PgPoolClient = Object.assign(connection, { release: () => {} });
    const pool: PgPool = { query: connection.query, connect: async () => client };
    const tx = postgresTransactional({ pool });
    // Act
    const outcome = await tx.runInTransaction({ key: 'k' }, () => 'done');
    // Assert
    expect(outcome).toMatchObject({ status: 'executed', value: 'done' });
    expect(connection.texts).toContain(claimText);
    expect(connection.texts).not.toContain(boundedText);
  });
});
