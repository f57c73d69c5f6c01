/**
 * The PostgreSQL store's claim sent alone, without a server: it is `claim-bounded.sql` (claim.sql with a
 * 100 ms transaction-local lock timeout set first), a lock timeout from it answers the key in progress for
 * `busyRetryAfterMs`, and the transactional mode keeps claim.sql, whose wait its own `lockTimeoutMs`
 * governs. The waits themselves are checked against a real server in
 * `test/integration/postgres/mixed-modes.test.ts`.
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

/** A PostgreSQL error as node-postgres rejects with it. */
function pgError(code: string): Error {
  return Object.assign(new Error(`error ${code}`), { code });
}

/**
 * A client that records the text of every statement and answers it with `answer(text, values)`: by
 * default one claimed row for a claim, no row for anything else.
 */
function recording(
  answer: (text: string, values: unknown[]) => unknown[] = (text) =>
    text.includes('INSERT INTO')
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
  it('sends claim-bounded.sql, with claim.sql’s parameters', async () => {
    // Arrange
    const db = recording();
    const store = postgresStore({ pool: db });
    // Act
    const result = await store.claim('k', lease);
    // Assert
    expect(db.texts).toEqual([boundedText]);
    expect(result).toEqual({ claimed: true, token: 7, attempt: 1, leaseUntil: 1 });
  });

  it('answers a lock timeout (55P03) as in progress, retry after busyRetryAfterMs, with no token', async () => {
    // Arrange
    const db = recording(() => {
      throw pgError('55P03');
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

  it('claims a key a batch left unsettled with claim-bounded.sql too', async () => {
    // Arrange: the batch function settles 'a' and leaves 'b' (its blocking row committed after the
    // batch's snapshot), which the store claims again on its own.
    const db = recording((text, values) => {
      if (text.includes('_claim_many"(')) {
        return [{ key: 'a', claimed: true, token: '1', attempt: 1, expires_at_ms: 1 }];
      }
      expect(values[0]).toBe('b');
      throw pgError('55P03');
    });
    const store = postgresStore({ pool: db, busyRetryAfterMs: 2000 });
    // Act
    const results = await store.claimMany?.([
      { key: 'a', ...lease },
      { key: 'b', ...lease },
    ]);
    // Assert
    expect(db.texts.slice(1)).toEqual([boundedText]);
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
