import { describe, expect, it } from 'vitest';
import { isInvalidOptionsError } from '../../../src/index.js';
import {
  type PgPool,
  type PgQueryable,
  type PostgresStoreOptions,
  postgresStore,
  postgresTransactional,
} from '../../../src/postgres/index.js';

// Never called: option checks happen before any statement is sent.
const unusedClient: PgQueryable & PgPool = {
  query: () => Promise.reject(new Error('no I/O in unit tests')),
  connect: () => Promise.reject(new Error('no I/O in unit tests')),
};

function invalidOptions(build: () => unknown): unknown {
  try {
    build();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('postgresStore options', () => {
  it('requires a client with query()', () => {
    // Act
    const error = invalidOptions(() => postgresStore({ pool: {} as PgQueryable }));
    // Assert
    expect(isInvalidOptionsError(error)).toBe(true);
  });

  it('reports its validated schema and table and declares purge, cross-process, batch and steps support', () => {
    // Act
    const store = postgresStore({ pool: unusedClient, schema: 'billing', table: 'keys' });
    // Assert
    expect(store).toMatchObject({ name: 'postgres', schema: 'billing', table: 'keys' });
    expect(store.capabilities).toEqual({
      crossProcess: true,
      purge: true,
      batch: true,
      batchMaxInFlight: 2,
      batchMaxInFlightWhenBusy: 1,
      steps: true,
    });
  });

  it.each([
    [{ prepare: 'true' }, /^postgresStore: prepare: expected true, false or 'auto', got "true"$/],
    [{ prepare: 'false' }, /^postgresStore: prepare: expected true, false or 'auto', got "false"$/],
    [{ busyRetryAfterMs: '1000' }, /^postgresStore: busyRetryAfterMs: .* got "1000"$/],
    [{ busyRetryAfterMs: -1 }, /^postgresStore: busyRetryAfterMs: expected a positive .* got -1$/],
    [{ busyRetryAfterMs: Number.NaN }, /^postgresStore: busyRetryAfterMs: .* got NaN$/],
    [{ busyRetry: 1000 }, /^postgresStore: unknown field "busyRetry"; the fields are pool, /],
  ])('refuses %o when created, showing the value with its type', (bad, message) => {
    // Act
    const error = invalidOptions(() =>
      postgresStore({ pool: unusedClient, ...(bad as object) } as PostgresStoreOptions),
    );
    // Assert
    expect(isInvalidOptionsError(error)).toBe(true);
    expect((error as Error).message).toMatch(message);
  });

  it.each([
    [true, 'a named statement'],
    [false, 'plain text'],
    ['auto', 'plain text'],
    [null, 'plain text'],
  ])(
    'takes prepare: %j as before: %s on a client that is not node-postgres',
    async (prepare, sent) => {
      // Arrange: a client that records what each query was given.
      const calls: unknown[] = [];
      const pool: PgQueryable = {
        query: async (...args: unknown[]) => {
          calls.push(args[0]);
          return { rows: [], rowCount: 0, command: 'SELECT' };
        },
      };
      const store = postgresStore({ pool, prepare: prepare as never });
      // Act
      await store.get('k');
      // Assert
      expect(typeof calls[0] === 'string' ? 'plain text' : 'a named statement').toBe(sent);
    },
  );

  it("takes busyRetryAfterMs as a duration string ('2s'): the retry after of a held key", async () => {
    // Arrange: every claim meets a row another transaction holds past the lock timeout (55P03).
    const pool: PgQueryable = {
      query: () =>
        Promise.reject(
          Object.assign(new Error('lock timeout'), {
            code: '55P03',
            where: 'while inserting index tuple (0,1) in relation "idempotency_records"',
          }),
        ),
    };
    const store = postgresStore({ pool, busyRetryAfterMs: '2s' });
    const before = Date.now();
    // Act
    const result = await store.claim('k', { fingerprint: 'fp', leaseMs: 1000 });
    // Assert
    const leaseUntil = result.claimed ? 0 : (result.record as { leaseUntil: number }).leaseUntil;
    expect(leaseUntil).toBeGreaterThanOrEqual(before + 2000);
    expect(leaseUntil).toBeLessThanOrEqual(Date.now() + 2000);
  });

  it('rejects a purge limit below one without touching the database', async () => {
    // Arrange
    const store = postgresStore({ pool: unusedClient });
    // Act
    const error = await store.purgeExpired({ limit: 0 }).catch((e) => e);
    // Assert
    expect(isInvalidOptionsError(error)).toBe(true);
  });
});

describe('postgresTransactional options', () => {
  it.each([
    ['a pool without connect()', { pool: { query: unusedClient.query } as unknown as PgPool }],
    ['an unknown isolation level', { pool: unusedClient, isolationLevel: 'snapshot' as never }],
    ['a negative lock timeout', { pool: unusedClient, lockTimeoutMs: -1 }],
    ['a fractional retry count', { pool: unusedClient, maxRetries: 1.5 }],
    ['a bad retention', { pool: unusedClient, retentionMs: 'soon' as never }],
    ['a table name with a quote', { pool: unusedClient, table: 'a"b' }],
  ])('refuses %s with InvalidOptionsError', (_, options) => {
    // Act
    const error = invalidOptions(() => postgresTransactional(options));
    // Assert
    expect(isInvalidOptionsError(error)).toBe(true);
  });

  it('derives the same storage key as the engine for (namespace, scope, key)', async () => {
    // Arrange
    const { createIdempotency, memoryStore } = await import('../../../src/index.js');
    const engine = createIdempotency({ store: memoryStore(), namespace: 'shop' });
    // Act
    const tx = postgresTransactional({ pool: unusedClient, namespace: 'shop' });
    // Assert
    expect(tx.storageKeyFor('k-1', 'tenant')).toBe(engine.storageKeyFor('k-1', 'tenant'));
  });
});
