import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { redisStore } from '../../../src/redis/index.js';
import type { RedisLib } from '../../helpers/redis-clients.js';
import { rawRedisStore, redisClientsForFile } from '../../helpers/redis-file-connection.js';

// How the Redis store keeps a claim's reservation (`reserveMs`): as its key's expiry, the value's layout
// unchanged. Dead reserved leases are written by hand here (a value whose lease has ended, on a key that
// expires later), so no test has to wait for a lease to end.
const prefix = `idemtest:reserve:${randomUUID().slice(0, 8)}:`;
const clients = redisClientsForFile(prefix);
const day = 86_400_000;

describe.each<RedisLib>(['node-redis', 'ioredis'])('redis claim reservations (%s)', (lib) => {
  const redis = rawRedisStore(clients, lib, prefix);
  const { raw, storeKey, redisNow, writeDeadLease } = redis;
  const expiryOf = async (key: string) => Number(await raw(['PEXPIRETIME', storeKey(key)]));

  it('keeps the value layout and carries the reservation as the key expiry', async () => {
    // Arrange
    const [reserved, plain, short] = [randomUUID(), randomUUID(), randomUUID()];
    // Act
    const a = await redis.store.claim(reserved, {
      fingerprint: 'fp',
      leaseMs: 60_000,
      reserveMs: day,
    });
    const b = await redis.store.claim(plain, { fingerprint: 'fp', leaseMs: 60_000 });
    const c = await redis.store.claim(short, {
      fingerprint: 'fp',
      leaseMs: 60_000,
      reserveMs: 30_000,
    });
    // Assert
    if (!a.claimed || !b.claimed || !c.claimed) throw new Error('claimed');
    expect(String(await raw(['GET', storeKey(reserved)]))).toBe(
      `p|${a.token}|${a.leaseUntil}|${Math.floor(a.token / 1000)}|1|fp`,
    );
    expect(await expiryOf(reserved)).toBe(Math.floor(a.token / 1000) + day);
    expect(await expiryOf(plain)).toBe(b.leaseUntil);
    expect(await expiryOf(short)).toBe(c.leaseUntil);
  });

  it('applies each batch item its own reservation, shared or per item, and to a lone combined claim', async () => {
    // Arrange
    const keys = [randomUUID(), randomUUID(), randomUUID()];
    const reserves = [day, 0, 2 * day];
    // Act: per-item pairs (same lease, different reservations), then a shared pair.
    const mixed = await redis.store.claimMany(
      keys.map((key, i) => ({
        key,
        fingerprint: `fp${i}`,
        leaseMs: 60_000,
        reserveMs: reserves[i],
      })),
    );
    const shared = [randomUUID(), randomUUID()];
    const sharedClaims = await redis.store.claimMany(
      shared.map((key) => ({ key, fingerprint: 'fp', leaseMs: 60_000, reserveMs: day })),
    );
    const lone = randomUUID();
    const combined = await redis.store.completeAndClaimMany(
      [
        {
          key: shared[0] as string,
          token: sharedClaims[0]?.claimed ? sharedClaims[0].token : 0,
          outcome: Uint8Array.of(1),
          retentionMs: 5_000,
        },
      ],
      [{ key: lone, fingerprint: 'fp', leaseMs: 60_000, reserveMs: day }],
    );
    // Assert
    for (const [i, claim] of mixed.entries()) {
      if (!claim.claimed) throw new Error(`item ${i} not claimed`);
      const clock = Math.floor(claim.token / 1000);
      expect(claim.leaseUntil).toBe(clock + 60_000);
      expect(await expiryOf(keys[i] as string)).toBe(
        clock + Math.max(60_000, reserves[i] as number),
      );
    }
    const second = sharedClaims[1];
    if (!second?.claimed) throw new Error('shared item not claimed');
    expect(await expiryOf(shared[1] as string)).toBe(Math.floor(second.token / 1000) + day);
    expect(combined.completed).toEqual([true]);
    const completedExpiry = await expiryOf(shared[0] as string);
    expect(completedExpiry).toBeLessThan((await redisNow()) + 6_000);
    const loneClaim = combined.claimed[0];
    if (!loneClaim?.claimed) throw new Error('lone claim not claimed');
    expect(await expiryOf(lone)).toBe(Math.floor(loneClaim.token / 1000) + day);
  });

  it('never moves the expiry earlier on extend, and moves it later with the lease', async () => {
    // Arrange
    const [reserved, plain] = [randomUUID(), randomUUID()];
    const a = await redis.store.claim(reserved, {
      fingerprint: 'fp',
      leaseMs: 60_000,
      reserveMs: day,
    });
    const b = await redis.store.claim(plain, { fingerprint: 'fp', leaseMs: 1_000 });
    if (!a.claimed || !b.claimed) throw new Error('claimed');
    const reservedUntil = await expiryOf(reserved);
    // Act
    const extended = [
      await redis.store.extend(reserved, a.token, 1_000),
      await redis.store.extend(plain, b.token, 60_000),
    ];
    // Assert
    expect(extended).toEqual([true, true]);
    expect(await expiryOf(reserved)).toBe(reservedUntil);
    const lease = await redis.store.get(reserved);
    expect(lease?.status === 'in_progress' && lease.leaseUntil).toBeLessThan(
      reservedUntil - day / 2,
    );
    const plainRecord = await redis.store.get(plain);
    if (plainRecord?.status !== 'in_progress') throw new Error('in progress');
    expect(await expiryOf(plain)).toBe(plainRecord.leaseUntil);
    expect(plainRecord.leaseUntil).toBeGreaterThan(b.leaseUntil);
  });

  it('returns a reserved dead lease to another fingerprint and lets the same one take it over', async () => {
    // Arrange
    const [single, batched] = [randomUUID(), randomUUID()];
    const crashed = await writeDeadLease(single, 'f|p é');
    const crashedBatched = await writeDeadLease(batched, 'fp');
    // Act
    const other = await redis.store.claim(single, { fingerprint: 'other', leaseMs: 60_000 });
    const hidden = await redis.store.get(single);
    const same = await redis.store.claim(single, { fingerprint: 'f|p é', leaseMs: 60_000 });
    const batch = await redis.store.claimMany([
      { key: batched, fingerprint: 'other', leaseMs: 60_000, reserveMs: day },
      { key: batched, fingerprint: 'fp', leaseMs: 60_000 },
      { key: batched, fingerprint: 'other', leaseMs: 60_000 },
    ]);
    // Assert
    expect(other).toMatchObject({
      claimed: false,
      record: { status: 'in_progress', fingerprint: 'f|p é', token: crashed.token, attempt: 3 },
    });
    expect(hidden).toBeUndefined();
    expect(same).toMatchObject({ claimed: true, attempt: 4 });
    expect(await redis.store.get(single)).toMatchObject({
      fingerprint: 'f|p é',
      createdAt: crashed.createdAt,
      attempt: 4,
    });
    expect(batch[0]).toMatchObject({ claimed: false, record: { token: crashedBatched.token } });
    expect(batch[1]).toMatchObject({ claimed: true, attempt: 4 });
    // The takeover asked for no reservation; its live lease still blocks the third item.
    expect(batch[2]).toMatchObject({ claimed: false, record: { fingerprint: 'fp', attempt: 4 } });
    if (!same.claimed || !batch[1]?.claimed) return;
    expect(await expiryOf(batched)).toBe(batch[1].leaseUntil);
  });

  it('counts a reserved dead lease as stale, and frees it on an admin delete', async () => {
    // Arrange: a store of its own, so that stats see this test's keys only.
    const connection = clients.get(lib);
    if (connection === undefined) throw new Error(`no ${lib} client`);
    const own = redisStore({
      client: connection.client,
      prefix: `${prefix}${lib}:stats:`,
      checkEvictionPolicy: false,
    });
    const key = randomUUID();
    const now = await redisNow();
    await raw([
      'SET',
      `${prefix}${lib}:stats:{${key}}`,
      `p|${now * 1000 - 5_000_000}|${now - 1000}|${now - 5000}|1|fp`,
      'PXAT',
      String(now + 60_000),
    ]);
    // Act
    const stats = await own.stats();
    const deleted = await own.delete(key);
    const next = await own.claim(key, { fingerprint: 'other', leaseMs: 60_000 });
    // Assert
    expect(stats).toMatchObject({ inProgress: 0, completed: 0, staleLeases: 1 });
    expect(deleted).toBe(false);
    expect(next).toMatchObject({ claimed: true, attempt: 1 });
    expect(next.claimed && next.token).toBeGreaterThan(now * 1000 - 5_000_000);
  });
});
