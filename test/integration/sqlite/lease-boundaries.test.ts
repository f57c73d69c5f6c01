/**
 * The exact ends of a lease and of a retention, on the stores whose clock a test can hold still (memory,
 * and SQLite, which judges by the process's clock): a lease is live while `now < leaseUntil` and dead from
 * `leaseUntil` on; an outcome is replayed while `now < expiresAt` and gone from `expiresAt` on. Redis and
 * PostgreSQL compare the same way (`<= now` is dead) on their own clocks.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { memoryStore, type Store } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite/index.js';
import { ManualClock } from '../../helpers/clock.js';

const dir = mkdtempSync(join(tmpdir(), 'ik-lease-boundaries-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const stores: Array<[string, (clock: ManualClock) => Store]> = [
  ['memory', (clock) => memoryStore({ clock })],
  ['sqlite', (clock) => sqliteStore({ database: join(dir, `${Math.random()}.db`), clock })],
];

describe.each(stores)('%s: the ends of a lease and of a retention', (_name, create) => {
  it('holds the lease until leaseUntil, exclusive: one ms before it blocks, at it another claim takes over', async () => {
    // Arrange
    const clock = new ManualClock();
    const store = create(clock);
    const first = await store.claim('k', { fingerprint: 'f', leaseMs: 1000 });
    expect(first).toMatchObject({ claimed: true });
    // Act / Assert: 999 ms later the lease is live (and extendable), at 1000 ms it is dead.
    clock.advance(999);
    expect(await store.claim('k', { fingerprint: 'f', leaseMs: 1000 })).toMatchObject({
      claimed: false,
      record: { status: 'in_progress', leaseUntil: clock.now() + 1 },
    });
    clock.advance(1);
    const token = (first as { token: number }).token;
    expect(await store.extend('k', token, 1000)).toBe(false);
    expect(await store.complete('k', token, new Uint8Array([1]), 1000)).toBe(false);
    expect(await store.get('k')).toBeUndefined();
    expect(await store.claim('k', { fingerprint: 'f', leaseMs: 1000 })).toMatchObject({
      claimed: true,
      attempt: 2,
    });
  });

  it('replays an outcome until expiresAt, exclusive', async () => {
    // Arrange
    const clock = new ManualClock();
    const store = create(clock);
    const claim = await store.claim('k', { fingerprint: 'f', leaseMs: 1000 });
    await store.complete('k', (claim as { token: number }).token, new Uint8Array([7]), 500);
    // Act / Assert
    clock.advance(499);
    expect(await store.get('k')).toMatchObject({ status: 'completed', expiresAt: clock.now() + 1 });
    clock.advance(1);
    expect(await store.get('k')).toBeUndefined();
    expect(await store.claim('k', { fingerprint: 'f', leaseMs: 1000 })).toMatchObject({
      claimed: true,
      attempt: 1,
    });
  });
});
