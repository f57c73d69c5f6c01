import { describe, expect, it } from 'vitest';
import { isInvalidOptionsError } from '../../../src/index.js';
import {
  type PgPool,
  type PgQueryable,
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
