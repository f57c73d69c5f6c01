/**
 * The reservation of a crashed claim's key (`reserveMs`) in the SQLite store, beyond the conformance
 * checks: the claim's locked path finds a reservation written after its lock-free read, `get`, `delete`,
 * `purgeExpired` and `stats` treat a reserved dead lease as the rules say, and rows written by a process
 * still running the statements of before migration 0002 (which know nothing of `reserved_until`) are
 * read as those rules expect.
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { sqliteStore } from '../../../src/sqlite/index.js';
import { ManualClock } from '../../helpers/clock.js';

const DAY = 86_400_000;

/** A store on an in-memory database, with a clock the test moves by hand. */
function fixture() {
  const db = new Database(':memory:');
  const clock = new ManualClock();
  const store = sqliteStore({ database: db, clock });
  const row = (key: string) =>
    db
      .prepare(
        'SELECT status, fingerprint, attempt, expires_at, reserved_until FROM idempotency_records WHERE key = ?',
      )
      .get(key);
  return { db, clock, store, row };
}

describe('sqlite store reservations', () => {
  it('answers from under the write lock a reserved dead lease written after the claim’s read', async () => {
    // Arrange: the lock-free read finds nothing; then, once this claim holds the lock (here from inside
    // the clock it reads there), a crashed claim of another fingerprint shows up, lease over, reservation
    // not: as if another process had committed it in between.
    const db = new Database(':memory:');
    let calls = 0;
    let insertRow = () => {};
    const now = 1_700_000_000_000;
    const store = sqliteStore({
      database: db,
      clock: {
        now: () => {
          if (++calls === 2) insertRow();
          return now;
        },
      },
    });
    insertRow = () =>
      db
        .prepare(
          `INSERT INTO idempotency_records (key, status, fingerprint, token, attempt, created_at,
             expires_at, reserved_until) VALUES ('late', 'in_progress', 'fp-a', 7, 1, ?, ?, ?)`,
        )
        .run(now - 100, now - 1, now + DAY);
    // Act
    const claim = await store.claim('late', { fingerprint: 'fp-b', leaseMs: 60_000 });
    // Assert
    expect(calls).toBe(2);
    expect(claim).toEqual({
      claimed: false,
      record: {
        status: 'in_progress',
        fingerprint: 'fp-a',
        token: 7,
        attempt: 1,
        createdAt: now - 100,
        leaseUntil: now - 1,
      },
    });
    await store.close();
  });

  it('hides a reserved dead lease from get and delete, keeps it from purge and counts it as stale', async () => {
    // Arrange
    const { clock, store, row } = fixture();
    const crashed = await store.claim('k', { fingerprint: 'fp-a', leaseMs: 100, reserveMs: 1_000 });
    if (!crashed.claimed) throw new Error('setup claim lost');
    expect(row('k')).toMatchObject({ reserved_until: clock.now() + 1_000 });
    clock.advance(500);
    // Act / Assert: lease over, reservation on.
    expect(await store.get('k')).toBeUndefined();
    expect(await store.purgeExpired()).toBe(0);
    expect(await store.stats()).toEqual({
      inProgress: 0,
      completed: 0,
      staleLeases: 1,
      oldestLeaseAgeMs: null,
    });
    expect(await store.claim('k', { fingerprint: 'fp-b', leaseMs: 100 })).toMatchObject({
      claimed: false,
      record: { fingerprint: 'fp-a', token: crashed.token },
    });
    // Reservation over: purged like any dead row.
    clock.advance(500);
    expect(await store.purgeExpired()).toBe(1);
    expect(row('k')).toBeUndefined();
    // delete() reports a reserved dead lease as not live, and removes it all the same (admin).
    const again = await store.claim('d', { fingerprint: 'fp-a', leaseMs: 100, reserveMs: 1_000 });
    expect(again.claimed).toBe(true);
    clock.advance(200);
    expect(await store.delete('d')).toBe(false);
    expect((await store.claim('d', { fingerprint: 'fp-b', leaseMs: 100 })).claimed).toBe(true);
    await store.close();
  });

  it('ends the reservation at the later of the lease and reserved_until, and clears it on completion', async () => {
    // Arrange
    const { clock, store, row } = fixture();
    const claim = await store.claim('k', { fingerprint: 'fp-a', leaseMs: 100, reserveMs: 300 });
    if (!claim.claimed) throw new Error('setup claim lost');
    // Act: an extension past the reservation, then the holder crashes.
    clock.advance(50);
    expect(await store.extend('k', claim.token, 1_000)).toBe(true);
    clock.advance(1_000);
    // Assert: lease over at +1050, reservation (+300) long over: free to anyone.
    expect((await store.claim('k', { fingerprint: 'fp-b', leaseMs: 100 })).claimed).toBe(true);
    // A reservation not above the lease reserves nothing: the column stays NULL.
    const small = await store.claim('s', { fingerprint: 'fp-a', leaseMs: 100, reserveMs: 100 });
    expect(small.claimed).toBe(true);
    expect(row('s')).toMatchObject({ reserved_until: null });
    // Completion ends the reservation: the retention guards the key from then on.
    const held = await store.claim('c', { fingerprint: 'fp-a', leaseMs: 100, reserveMs: DAY });
    if (!held.claimed) throw new Error('setup claim lost');
    expect(await store.complete('c', held.token, new Uint8Array([1]), 100)).toBe(true);
    expect(row('c')).toMatchObject({ status: 'completed', reserved_until: null });
    clock.advance(100);
    // Every row is dead and unreserved now: fp-b's claim of 'k', 's' and the completed 'c'.
    expect(await store.purgeExpired()).toBe(3);
    expect((await store.claim('c', { fingerprint: 'fp-b', leaseMs: 100 })).claimed).toBe(true);
    await store.close();
  });

  it('ignores a reserved_until left on a completed row by a process of before migration 0002', async () => {
    // Arrange: that process's complete.sql does not clear the column, so a completed row may carry the
    // reservation of the claim it completed.
    const { db, clock, store, row } = fixture();
    const claim = await store.claim('k', { fingerprint: 'fp-a', leaseMs: 100, reserveMs: DAY });
    if (!claim.claimed) throw new Error('setup claim lost');
    db.prepare(
      `UPDATE idempotency_records SET status = 'completed', outcome = x'01', completed_at = ?,
         expires_at = ? WHERE key = 'k'`,
    ).run(clock.now(), clock.now() + 100);
    expect(row('k')).toMatchObject({ status: 'completed', reserved_until: clock.now() + DAY });
    clock.advance(100);
    // Act / Assert: the outcome's retention is over; the row is gone for claim and purge alike.
    expect(await store.purgeExpired()).toBe(1);
    const replaced = await store.claim('k', { fingerprint: 'fp-a', leaseMs: 100, reserveMs: DAY });
    if (!replaced.claimed) throw new Error('setup claim lost');
    db.prepare(
      `UPDATE idempotency_records SET status = 'completed', outcome = x'01', completed_at = ?,
         expires_at = ? WHERE key = 'k'`,
    ).run(clock.now(), clock.now() + 100);
    clock.advance(100);
    expect(await store.claim('k', { fingerprint: 'fp-b', leaseMs: 100 })).toMatchObject({
      claimed: true,
      attempt: 1,
    });
    await store.close();
  });
});
