/**
 * Fingerprints that PostgreSQL text cannot hold as they are (a NUL, an unpaired surrogate), on the real
 * server: every claim path stores them, and the same request replays while another is a mismatch, as on
 * the other stores.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, RecordStatus } from '../../../src/index.js';
import { postgresStore, postgresTransactional } from '../../../src/postgres/index.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
const newKey = (label: string) => `${label}-${randomUUID()}`;
// A digest kept as a 'binary' string (NUL included), and a string cut inside a surrogate pair.
const WITH_NUL = 'sha\u0000\u00ff\u0001digest';
const UNPAIRED = 'emoji \ud83d cut';
const lease = { leaseMs: 30_000 };
const outcome = new Uint8Array([1, 2, 3]);

beforeAll(async () => {
  fx = await setupPostgres('fptext');
});

afterAll(async () => {
  await fx.dispose();
});

describe('postgresStore fingerprints that text cannot hold as they are', () => {
  it.each([
    ['a NUL', WITH_NUL],
    ['an unpaired surrogate', UNPAIRED],
  ])(
    'replays the same request with %s, and tells another apart, through the engine',
    async (_, fingerprint) => {
      // Arrange: no local cache, so every answer comes from the database; failOpen, so an outage would run it.
      const store = postgresStore({ pool: fx.pool, schema: fx.schema });
      const idempotency = createIdempotency({ store, cache: false, failOpen: true });
      const key = newKey('engine');
      let runs = 0;
      // Act
      const first = await idempotency.run({ key, fingerprint }, async () => ++runs);
      const again = await idempotency.run({ key, fingerprint }, async () => ++runs);
      const other = await idempotency.run(
        { key, fingerprint: `${fingerprint}!` },
        async () => ++runs,
      );
      // Assert
      expect(first).toMatchObject({ status: 'executed', failedOpen: false });
      expect(again).toEqual({ status: 'replayed', value: 1 });
      expect(other.status).toBe('mismatch');
      expect(runs).toBe(1);
    },
  );

  it('answers a claim batch and a completions-and-claims call with the request’s own fingerprint', async () => {
    // Arrange
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const [a, b] = [newKey('a'), newKey('b')];
    const claims = [
      { key: a, fingerprint: WITH_NUL, ...lease },
      { key: b, fingerprint: UNPAIRED, ...lease },
    ];
    // Act
    const won = await store.claimMany!(claims);
    const held = await store.claimMany!(claims);
    const token = (won[0] as { token: number }).token;
    const both = await store.completeAndClaimMany!(
      [{ key: a, token, outcome, retentionMs: 60_000 }],
      claims,
    );
    // Assert
    expect(won.map((result) => (result as { claimed: boolean }).claimed)).toEqual([true, true]);
    expect(held).toMatchObject([
      { claimed: false, record: { status: RecordStatus.InProgress, fingerprint: WITH_NUL } },
      { claimed: false, record: { status: RecordStatus.InProgress, fingerprint: UNPAIRED } },
    ]);
    expect(both.completed).toEqual([true]);
    expect(both.claimed).toMatchObject([
      { claimed: false, record: { status: RecordStatus.Completed, fingerprint: WITH_NUL } },
      { claimed: false, record: { status: RecordStatus.InProgress, fingerprint: UNPAIRED } },
    ]);
  });

  it('keeps the reservation of a crashed claim for its own request only', async () => {
    // Arrange: a claim whose lease ends at once, reserved for its request for a minute.
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const key = newKey('reserved');
    await store.claim(key, { fingerprint: WITH_NUL, leaseMs: 1, reserveMs: 60_000 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    // Act
    const other = await store.claim(key, { fingerprint: UNPAIRED, ...lease });
    const same = await store.claim(key, { fingerprint: WITH_NUL, ...lease });
    // Assert
    // Another request sees the stored form, which is not its fingerprint: a mismatch to the engine.
    expect(other).toMatchObject({ claimed: false, record: { status: RecordStatus.InProgress } });
    expect((other as { record: { fingerprint: string } }).record.fingerprint).not.toBe(UNPAIRED);
    expect(same).toMatchObject({ claimed: true });
  });

  it('replays a transactional run’s outcome to the same request', async () => {
    // Arrange
    const transactional = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const key = newKey('tx');
    // Act
    const first = await transactional.runInTransaction(
      { key, fingerprint: WITH_NUL },
      () => 'done',
    );
    const again = await transactional.runInTransaction(
      { key, fingerprint: WITH_NUL },
      () => 'twice',
    );
    // Assert
    expect(first.status).toBe('executed');
    expect(again).toEqual({ status: 'replayed', value: 'done' });
  });
});
