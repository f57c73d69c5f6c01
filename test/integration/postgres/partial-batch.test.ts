/**
 * A PostgreSQL batch that falls back to one statement per key (a lock timeout: some key's row is held by
 * another transaction) and then fails for one key alone: only that key's caller is told, as a
 * `PartialBatchError` item; the keys applied beside it are answered with their results, so their callers
 * neither retry a completion that was applied nor leave a claimed key held for a whole lease. The failure
 * is real: a row locked by a transaction of this test's own connection, and a pool whose connections set a
 * short `statement_timeout` (claims) or `lock_timeout` (completions), as an operator's role settings may.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStoreUnavailableError } from '../../../src/index.js';
import { type PostgresStore, postgresStore } from '../../../src/postgres/index.js';
import { withBatching } from '../../../src/store/batching.js';
import { partialResults } from '../../../src/store/partial-batch.js';
import type { CompleteRequest } from '../../../src/store/store.js';
import { env } from '../../helpers/env.js';
import {
  type PostgresFixture,
  setBatchLockTimeout,
  setupPostgres,
} from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
const pools: pg.Pool[] = [];

beforeAll(async () => {
  fx = await setupPostgres('partial', { max: 2 });
  // The batch gives up on the held row at once (not after 0006's 100 ms), well within the pools' timeouts.
  await setBatchLockTimeout(fx.pool, fx.schema, '10ms');
});

afterAll(async () => {
  await Promise.all(pools.map((pool) => pool.end()));
  await fx.dispose();
});

/** A store on a pool of its own, whose connections run with the given session settings. */
function storeWith(settings: string): PostgresStore {
  const pool = new pg.Pool({ connectionString: env.databaseUrl, max: 6, options: settings });
  pool.on('error', () => {});
  pools.push(pool);
  return postgresStore({ pool, schema: fx.schema });
}

const day = 86_400_000;
const lease = { fingerprint: 'fp', leaseMs: 60_000 };
const key = (label: string) => `${label}:${randomUUID()}`;

/** Run `body` while a transaction of a connection of this test's own holds `locked`'s row. */
async function whileLocked(locked: string, body: () => Promise<void>): Promise<void> {
  const holder = new pg.Client({ connectionString: env.databaseUrl });
  holder.on('error', () => {});
  await holder.connect();
  try {
    await holder.query('BEGIN');
    const { rowCount } = await holder.query(
      `SELECT 1 FROM "${fx.schema}".idempotency_records WHERE key = $1 FOR UPDATE`,
      [locked],
    );
    expect(rowCount).toBe(1);
    await body();
  } finally {
    await holder.query('ROLLBACK').catch(() => {});
    await holder.end();
  }
}

describe('postgresStore batch items that fail alone after a lock timeout', () => {
  it('claimMany answers the claimed keys and fails only the key whose claim failed', async () => {
    // Arrange: a claim of the held key is cancelled by statement_timeout (80 ms) before claim-bounded.sql's
    // own 100 ms lock timeout could answer it in progress.
    const store = storeWith('-c statement_timeout=80');
    const [a, b, heldKey] = [key('a'), key('b'), key('held')] as [string, string, string];
    expect(await store.claim(heldKey, lease)).toMatchObject({ claimed: true });
    await whileLocked(heldKey, async () => {
      // Act
      const error = await store.claimMany!([a, heldKey, b].map((k) => ({ key: k, ...lease }))).then(
        () => undefined,
        (rejection: unknown) => rejection,
      );
      // Assert: the call as a whole rejects (the contract's type has no room for an item's error), and
      // reports each item's own answer.
      expect(isStoreUnavailableError(error)).toBe(true);
      const items = partialResults(error) as unknown[];
      expect(items).toHaveLength(3);
      expect(items[0]).toMatchObject({ claimed: true });
      expect(items[2]).toMatchObject({ claimed: true });
      expect(isStoreUnavailableError(items[1])).toBe(true);
      expect(String((items[1] as Error).message)).toContain('statement timeout');
    });
    expect(await store.get(a)).toMatchObject({ status: 'in_progress' });
  });

  it('through the engine’s batcher, each caller of the batch gets its own answer', async () => {
    // Arrange
    const store = storeWith('-c statement_timeout=80');
    const batched = withBatching(store);
    const [a, b, heldKey] = [key('a'), key('b'), key('held')] as [string, string, string];
    expect(await store.claim(heldKey, lease)).toMatchObject({ claimed: true });
    await whileLocked(heldKey, async () => {
      // Act: one tick, one batch.
      const [first, held, second] = await Promise.allSettled(
        [a, heldKey, b].map((k) => batched.claim(k, lease)),
      );
      // Assert
      expect(first).toMatchObject({ status: 'fulfilled', value: { claimed: true } });
      expect(second).toMatchObject({ status: 'fulfilled', value: { claimed: true } });
      expect(held?.status).toBe('rejected');
      expect(isStoreUnavailableError(held?.status === 'rejected' && held.reason)).toBe(true);
    });
  });

  it('completeAndClaimMany sent as two batches answers the completion and the claims beside the failed one', async () => {
    // Arrange: the function of 0004 gives up on the held row (its lock timeout), so the store sends the
    // completion and the claims as two batches, and the held key's claim then fails alone.
    const store = storeWith('-c statement_timeout=80');
    const done = key('done');
    const claim = await store.claim(done, lease);
    if (!claim.claimed) throw new Error('not claimed');
    const [a, b, heldKey] = [key('a'), key('b'), key('held')] as [string, string, string];
    expect(await store.claim(heldKey, lease)).toMatchObject({ claimed: true });
    const batched = withBatching(store);
    await whileLocked(heldKey, async () => {
      // Act: one tick, one call carrying both kinds.
      const completion = batched.complete(done, claim.token, Buffer.from('ok'), day);
      const claims = [a, heldKey, b].map((k) => batched.claim(k, lease));
      const [completed, first, held, second] = await Promise.allSettled([completion, ...claims]);
      // Assert
      expect(completed).toEqual({ status: 'fulfilled', value: true });
      expect(first).toMatchObject({ status: 'fulfilled', value: { claimed: true } });
      expect(second).toMatchObject({ status: 'fulfilled', value: { claimed: true } });
      expect(held?.status).toBe('rejected');
    });
    expect(await store.get(done)).toMatchObject({ status: 'completed' });
  });

  it('completeMany answers the completed keys and fails only the key held past the lock timeout', async () => {
    // Arrange: complete_many waits for rows (0006 bounds only the claims); the pool's 50 ms lock_timeout
    // bounds it, and then the held key's completion sent alone.
    const store = storeWith('-c lock_timeout=50');
    const keys = [key('a'), key('held'), key('b')] as const;
    const tokens: number[] = [];
    for (const k of keys) {
      const claim = await store.claim(k, lease);
      if (!claim.claimed) throw new Error('not claimed');
      tokens.push(claim.token);
    }
    const batched = withBatching(store);
    await whileLocked(keys[1], async () => {
      // Act: one tick, one batch.
      const answers = await Promise.allSettled(
        keys.map((k, i) => batched.complete(k, tokens[i] as number, Buffer.from('ok'), day)),
      );
      // Assert
      expect(answers[0]).toEqual({ status: 'fulfilled', value: true });
      expect(answers[2]).toEqual({ status: 'fulfilled', value: true });
      expect(answers[1]?.status).toBe('rejected');
    });
    expect(await store.get(keys[0])).toMatchObject({ status: 'completed' });
    expect(await store.get(keys[1])).toMatchObject({ status: 'in_progress' });
  });

  it('a batch of which nothing was applied rejects with the plain error', async () => {
    // Arrange: both keys' rows held.
    const store = storeWith('-c lock_timeout=50');
    const keys = [key('a'), key('b')];
    const requests: CompleteRequest[] = [];
    for (const k of keys) {
      const claim = await store.claim(k, lease);
      if (!claim.claimed) throw new Error('not claimed');
      requests.push({ key: k, token: claim.token, outcome: Buffer.from('ok'), retentionMs: day });
    }
    await whileLocked(keys[0] as string, () =>
      whileLocked(keys[1] as string, async () => {
        // Act
        const error = await store.completeMany!(requests).catch((rejection: unknown) => rejection);
        // Assert
        expect(isStoreUnavailableError(error)).toBe(true);
        expect(partialResults(error)).toBeUndefined();
      }),
    );
  });
});
