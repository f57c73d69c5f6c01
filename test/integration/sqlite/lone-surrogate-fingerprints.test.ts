/**
 * Fingerprints holding an unpaired surrogate in the SQLite store. better-sqlite3 binds text as UTF-8, where
 * such a fingerprint has no form (U+FFFD is sent in its place): the store keeps its digest instead
 * (`src/core/stored-fingerprint.ts`), so the same request's retry replays and a request that differs only
 * there is a mismatch, on every claim path and in the transactional mode. Every other fingerprint, a NUL
 * included, is still stored as is, so rows written by earlier releases keep matching their retries.
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { defaultCodec, encodeValueOutcome } from '../../../src/core/outcome.js';
import { fingerprintDigest } from '../../../src/core/stored-fingerprint.js';
import { createIdempotency } from '../../../src/index.js';
import { storedFingerprint as postgresStoredFingerprint } from '../../../src/postgres/fingerprint-text.js';
import { sqliteStore, sqliteTransactional } from '../../../src/sqlite/index.js';
import { ManualClock } from '../../helpers/clock.js';

const DAY = 86_400_000;
// The same request twice, and two others that a UTF-8 encoding makes alike: another lone half, and the
// replacement character itself.
const LONE = 'POST /pay amount=100 memo=\ud83d';
const OTHER_LONE = 'POST /pay amount=100 memo=\udc00';
const REPLACEMENT = 'POST /pay amount=100 memo=\ufffd';
// What the text of LONE's bytes, as the driver binds them (WTF-8: ED A0 BD), reads back as.
const READ_BACK = 'POST /pay amount=100 memo=\ufffd\ufffd\ufffd';

function fixture() {
  const db = new Database(':memory:');
  const clock = new ManualClock();
  const store = sqliteStore({ database: db, clock });
  const storedOf = (key: string) =>
    (
      db.prepare('SELECT fingerprint FROM idempotency_records WHERE key = ?').get(key) as
        | { fingerprint: string }
        | undefined
    )?.fingerprint;
  // Two engines without the local cache of completed records: two processes sharing the file.
  const engine = () => createIdempotency({ store, clock, cache: false, extendLease: false });
  return { db, clock, store, storedOf, first: engine(), second: engine() };
}

describe('sqlite store: fingerprints with a lone surrogate', () => {
  it("replays the same request's retry from another engine instead of answering a mismatch", async () => {
    // Arrange
    const { first, second } = fixture();
    let charges = 0;
    const charge = () => ++charges;
    // Act
    const executed = await first.run({ key: 'pay-1', fingerprint: LONE }, charge);
    const retried = await second.run({ key: 'pay-1', fingerprint: LONE }, charge);
    // Assert
    expect(executed.status).toBe('executed');
    expect(retried).toMatchObject({ status: 'replayed', value: 1 });
    expect(charges).toBe(1);
  });

  it('answers a mismatch to a request that differs only in its lone surrogate, or has U+FFFD there', async () => {
    // Arrange
    const { first, second } = fixture();
    await first.run({ key: 'pay-2', fingerprint: LONE }, () => 'charged');
    // Act
    const other = await second.run({ key: 'pay-2', fingerprint: OTHER_LONE }, () => 'again');
    const replacement = await second.run({ key: 'pay-2', fingerprint: REPLACEMENT }, () => 'again');
    const readBack = await second.run({ key: 'pay-2', fingerprint: READ_BACK }, () => 'again');
    // Assert
    expect(other.status).toBe('mismatch');
    expect(replacement.status).toBe('mismatch');
    expect(readBack.status).toBe('mismatch');
  });

  it('answers a claim in flight with the request’s own fingerprint (in progress, not a mismatch)', async () => {
    // Arrange
    const { store } = fixture();
    await store.claim('pay-3', { fingerprint: LONE, leaseMs: 60_000 });
    // Act
    const single = await store.claim('pay-3', { fingerprint: LONE, leaseMs: 60_000 });
    const [batched] = await store.claimMany([{ key: 'pay-3', fingerprint: LONE, leaseMs: 60_000 }]);
    const combined = await store.completeAndClaimMany(
      [],
      [{ key: 'pay-3', fingerprint: LONE, leaseMs: 60_000 }],
    );
    const other = await store.claim('pay-3', { fingerprint: OTHER_LONE, leaseMs: 60_000 });
    // Assert
    for (const result of [single, batched, combined.claimed[0]]) {
      expect(result).toMatchObject({ claimed: false, record: { fingerprint: LONE } });
    }
    expect(other).toMatchObject({
      claimed: false,
      record: { fingerprint: fingerprintDigest(LONE) },
    });
  });

  it("lets only the same request take over a crashed claim's reservation, with its recorded steps", async () => {
    // Arrange: the holder recorded a step, then crashed; its lease is over, its reservation is not.
    const { clock, store } = fixture();
    const crashed = await store.claim('pay-4', {
      fingerprint: LONE,
      leaseMs: 1000,
      reserveMs: DAY,
    });
    if (!crashed.claimed) throw new Error('claimed');
    await store.saveStep('pay-4', crashed.token, 'charge', Uint8Array.of(7));
    clock.advance(2000);
    // Act
    const other = await store.claim('pay-4', {
      fingerprint: REPLACEMENT,
      leaseMs: 1000,
      reserveMs: DAY,
    });
    const same = await store.claim('pay-4', { fingerprint: LONE, leaseMs: 1000, reserveMs: DAY });
    // Assert
    expect(other.claimed).toBe(false);
    expect(same).toMatchObject({ claimed: true, attempt: 2 });
    if (!same.claimed) throw new Error('claimed');
    expect(await store.loadSteps('pay-4', same.token)).toEqual({ charge: Uint8Array.of(7) });
  });

  it("replays the transactional mode's retry, and refuses the other lone half", async () => {
    // Arrange
    const { db, clock } = fixture();
    const transactional = sqliteTransactional({ database: db, clock });
    let charges = 0;
    const charge = () => ++charges;
    // Act
    const executed = await transactional.runInTransaction({ key: 't', fingerprint: LONE }, charge);
    const retried = await transactional.runInTransaction({ key: 't', fingerprint: LONE }, charge);
    const other = await transactional.runInTransaction(
      { key: 't', fingerprint: OTHER_LONE },
      charge,
    );
    // Assert
    expect(executed.status).toBe('executed');
    expect(retried).toMatchObject({ status: 'replayed', value: 1 });
    expect(other.status).toBe('mismatch');
    expect(charges).toBe(1);
  });

  it('relies on better-sqlite3 binding a lone surrogate as its WTF-8 bytes (rows of earlier releases)', () => {
    // Arrange: the comparison with the fingerprint as earlier releases bound it is exact only while the
    // driver keeps distinct lone halves distinct (not all U+FFFD): a driver or Node upgrade that changes
    // this must fail here.
    const { db } = fixture();
    const hex = db.prepare('SELECT hex(?) AS a, hex(?) AS b, hex(?) AS c');
    // Act
    const bytes = hex.get('\ud83d', '\udc00', '\ufffd');
    // Assert
    expect(bytes).toEqual({ a: 'EDA0BD', b: 'EDB080', c: 'EFBFBD' });
  });

  it("stores such a fingerprint as the PostgreSQL store's digest, and every other one as it is", async () => {
    // Arrange
    const { store, storedOf } = fixture();
    const kept = ['ab', 'a\u0000b', '😀 é', 'ik-fp:sha256:00', ''];
    // Act
    await store.claim('lone', { fingerprint: LONE, leaseMs: 60_000 });
    for (const [i, fingerprint] of kept.entries()) {
      await store.claim(`kept-${i}`, { fingerprint, leaseMs: 60_000 });
    }
    // Assert
    expect(storedOf('lone')).toBe(fingerprintDigest(LONE));
    expect(storedOf('lone')).toBe(postgresStoredFingerprint(LONE));
    for (const [i, fingerprint] of kept.entries()) expect(storedOf(`kept-${i}`)).toBe(fingerprint);
  });

  it('keeps matching the rows an earlier release wrote, a NUL fingerprint included', async () => {
    // Arrange: completed rows as the statements of before this change wrote them (fingerprint as given).
    const { db, clock, second } = fixture();
    const insert = db.prepare(
      `INSERT INTO idempotency_records (key, status, fingerprint, token, attempt, created_at, expires_at,
         completed_at, outcome) VALUES (?, 'completed', ?, ?, 1, ?, ?, ?, ?)`,
    );
    const now = clock.now();
    const paid = encodeValueOutcome(defaultCodec.encode('paid'));
    const hexKey = second.storageKeyFor('old-hex');
    const nulKey = second.storageKeyFor('old-nul');
    insert.run(hexKey, 'f'.repeat(64), 1, now, now + DAY, now, paid);
    insert.run(nulKey, 'a\u0000b', 2, now, now + DAY, now, paid);
    insert.run(second.storageKeyFor('old-lone'), LONE, 3, now, now + DAY, now, paid);
    // Act
    const hex = await second.run({ key: 'old-hex', fingerprint: 'f'.repeat(64) }, () => 'again');
    const nul = await second.run({ key: 'old-nul', fingerprint: 'a\u0000b' }, () => 'again');
    const lone = await second.run({ key: 'old-lone', fingerprint: LONE }, () => 'again');
    const other = await second.run({ key: 'old-lone', fingerprint: OTHER_LONE }, () => 'again');
    // Assert
    expect(hex).toMatchObject({ status: 'replayed', value: 'paid' });
    expect(nul).toMatchObject({ status: 'replayed', value: 'paid' });
    expect(lone).toMatchObject({ status: 'replayed', value: 'paid' });
    expect(other.status).toBe('mismatch');
  });

  it('lets a crashed claim an earlier release wrote be taken over by its own request, steps kept', async () => {
    // Arrange: the row as releases before the digest wrote it (the fingerprint bound as given), reserved.
    const { db, clock, store, storedOf } = fixture();
    const now = clock.now();
    db.prepare(
      `INSERT INTO idempotency_records (key, status, fingerprint, token, attempt, created_at, expires_at,
         reserved_until, steps) VALUES ('crashed', 'in_progress', ?, 5, 1, ?, ?, ?, ?)`,
    ).run(LONE, now - 2000, now - 1000, now + DAY, JSON.stringify({ charge: 'Bw==' }));
    // Act
    const other = await store.claim('crashed', {
      fingerprint: OTHER_LONE,
      leaseMs: 1000,
      reserveMs: DAY,
    });
    const same = await store.claim('crashed', { fingerprint: LONE, leaseMs: 1000, reserveMs: DAY });
    // Assert
    expect(other).toMatchObject({ claimed: false, record: { token: 5 } });
    expect(same).toMatchObject({ claimed: true, attempt: 2 });
    if (!same.claimed) throw new Error('claimed');
    expect(await store.loadSteps('crashed', same.token)).toEqual({ charge: Uint8Array.of(7) });
    expect(storedOf('crashed')).toBe(fingerprintDigest(LONE));
  });
});
