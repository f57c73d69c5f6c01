import { randomUUID } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { createIdempotency, type Idempotency, type RunRequest } from '../../../src/index.js';
import type { RedisLib } from '../../helpers/redis-clients.js';
import { rawRedisStore, redisClientsForFile } from '../../helpers/redis-file-connection.js';

// How the Redis store keeps recorded steps: a hash `<record key>:s` next to the record, whose field `#`
// (the lineage, `<createdAt>|<fingerprint>`) says which record they belong to. Dead leases are written by
// hand (a value whose lease has ended, on a key that expires later), so no test waits for a lease to end.
const prefix = `idemtest:steps:${randomUUID().slice(0, 8)}:`;
const clients = redisClientsForFile(prefix);
const day = 86_400_000;

describe.each<RedisLib>(['node-redis', 'ioredis'])('redis recorded steps (%s)', (lib) => {
  const redis = rawRedisStore(clients, lib, prefix);
  const { raw, storeKey, redisNow, writeDeadLease } = redis;
  const stepsKey = (key: string) => `${storeKey(key)}:s`;
  const expiryOf = async (redisKey: string) => Number(await raw(['PEXPIRETIME', redisKey]));
  const exists = async (redisKey: string) => Number(await raw(['EXISTS', redisKey])) === 1;
  const lineageOf = async (key: string) => String(await raw(['HGET', stepsKey(key), '#']));
  const text = (bytes: Uint8Array | undefined) =>
    bytes === undefined ? undefined : Buffer.from(bytes).toString();

  /** Run a first attempt of `request` that records its charge, then "dies" (hangs, never extending). */
  const crashAfterCharge = async (
    idempotency: Idempotency,
    request: RunRequest,
    charge: () => unknown,
  ): Promise<void> => {
    let charged!: () => void;
    const chargedOnce = new Promise<void>((resolve) => (charged = resolve));
    void idempotency.run(request, async (ctx) => {
      await ctx.step('charge', charge);
      charged();
      return new Promise(() => {});
    });
    await chargedOnce;
  };

  it('keeps steps in a hash next to the record, tagged with its lineage, expiring with it', async () => {
    // Arrange
    const key = randomUUID();
    const claim = await redis.store.claim(key, {
      fingerprint: 'fp|1',
      leaseMs: 60_000,
      reserveMs: day,
    });
    if (!claim.claimed) throw new Error('claimed');
    // Act
    const saved = await redis.store.saveStep(key, claim.token, 'charge', Buffer.from('ch_1'));
    // Assert: the record's value is untouched; the hash holds the step and `<createdAt>|<fingerprint>`.
    expect(saved).toBe(true);
    expect(String(await raw(['TYPE', stepsKey(key)]))).toBe('hash');
    expect(await lineageOf(key)).toBe(`${Math.floor(claim.token / 1000)}|fp|1`);
    expect(String(await raw(['HGET', stepsKey(key), 'charge']))).toBe('ch_1');
    expect(String(await raw(['GET', storeKey(key)]))).toMatch(/^p\|\d+\|\d+\|\d+\|1\|fp\|1$/);
    expect(await expiryOf(stepsKey(key))).toBe(await expiryOf(storeKey(key)));
    expect(await expiryOf(stepsKey(key))).toBe(Math.floor(claim.token / 1000) + day);
    // stats() counts records only (the steps key is a hash, outside `<prefix>{*}`).
    expect((await redis.store.stats()).inProgress).toBeGreaterThanOrEqual(1);
  });

  it('round-trips every byte value, a 64 KiB result and any valid name, `__proto__` included', async () => {
    // Arrange
    const key = randomUUID();
    const claim = await redis.store.claim(key, { fingerprint: 'fp', leaseMs: 60_000 });
    if (!claim.claimed) throw new Error('claimed');
    const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
    const large = Uint8Array.from({ length: 65_536 }, (_, i) => (i * 7) % 256);
    const utf8 = Buffer.from('\uFEFFé✓ \u{1F600}');
    const empty = new Uint8Array(0);
    // Act
    for (const [name, value] of [
      ['bytes', bytes],
      ['large', large],
      ['utf8', utf8],
      ['empty', empty],
      ['__proto__', Buffer.from('p')],
      ['A.b_c:d-9', Buffer.from('n')],
      ['x'.repeat(100), Buffer.from('long')],
    ] as const) {
      expect(await redis.store.saveStep(key, claim.token, name, value), name).toBe(true);
    }
    const steps = await redis.store.loadSteps(key, claim.token);
    // Assert
    expect(steps).toBeDefined();
    expect(Object.getPrototypeOf(steps)).toBe(Object.prototype);
    expect(Object.keys(steps ?? {}).sort()).toEqual(
      ['A.b_c:d-9', '__proto__', 'bytes', 'empty', 'large', 'utf8', 'x'.repeat(100)].sort(),
    );
    expect(Buffer.from(steps?.bytes ?? []).equals(Buffer.from(bytes))).toBe(true);
    expect(Buffer.from(steps?.large ?? []).equals(Buffer.from(large))).toBe(true);
    expect(Buffer.from(steps?.utf8 ?? []).equals(utf8)).toBe(true);
    expect(steps?.empty).toEqual(new Uint8Array(0));
    expect(text(Object.getOwnPropertyDescriptor(steps, '__proto__')?.value)).toBe('p');
  });

  it('hands the steps to a takeover by the same request and refreshes their expiry', async () => {
    // Arrange: a crashed claim (attempt 3) that recorded a step, as its script would have.
    const key = randomUUID();
    const { createdAt } = await writeDeadLease(key, 'fp', 60_000);
    await raw(['HSET', stepsKey(key), '#', `${createdAt}|fp`, 'charge', 'ch_1']);
    await raw(['PEXPIRE', stepsKey(key), '60000']);
    // Act
    const next = await redis.store.claim(key, {
      fingerprint: 'fp',
      leaseMs: 60_000,
      reserveMs: day,
    });
    if (!next.claimed) throw new Error('claimed');
    const steps = await redis.store.loadSteps(key, next.token);
    // Assert: the same lineage; the steps key now lives as long as the record key (the takeover's).
    expect(next.attempt).toBe(4);
    expect(Object.keys(steps ?? {})).toEqual(['charge']);
    expect(text(steps?.charge)).toBe('ch_1');
    expect(await expiryOf(stepsKey(key))).toBe(await expiryOf(storeKey(key)));
    expect(await expiryOf(stepsKey(key))).toBeGreaterThan((await redisNow()) + day - 60_000);
  });

  it('moves the steps’ expiry with the record on a takeover by the same request, by every claim path', async () => {
    // Arrange: crashed claims (attempt 3) that recorded a step, their steps key expiring in a minute and
    // their record key later (a takeover's reservation outlives the first claim's), and a held claim for
    // the combined script's completion.
    const [single, batched, other, combined] = [
      randomUUID(),
      randomUUID(),
      randomUUID(),
      randomUUID(),
    ];
    for (const key of [single, batched, other, combined]) {
      const { createdAt } = await writeDeadLease(key, 'fp', 120_000);
      await raw(['HSET', stepsKey(key), '#', `${createdAt}|fp`, 'charge', 'ch_1']);
      await raw(['PEXPIRE', stepsKey(key), '60000']);
    }
    const done = randomUUID();
    const held = await redis.store.claim(done, { fingerprint: 'fp', leaseMs: 60_000 });
    if (!held.claimed) throw new Error('claimed');
    const stepsExpiry = async (key: string) => expiryOf(stepsKey(key));
    // Act: no step call, no extension after the takeovers (each "crashes" at once).
    const claim = await redis.store.claim(single, {
      fingerprint: 'fp',
      leaseMs: 60_000,
      reserveMs: day,
    });
    const many = await redis.store.claimMany([
      { key: batched, fingerprint: 'fp', leaseMs: 60_000, reserveMs: day },
      { key: other, fingerprint: 'fp', leaseMs: 30_000, reserveMs: 0 },
    ]);
    const both = await redis.store.completeAndClaimMany(
      [{ key: done, token: held.token, outcome: Buffer.from('ok'), retentionMs: day }],
      [{ key: combined, fingerprint: 'fp', leaseMs: 60_000, reserveMs: day }],
    );
    // Assert: every takeover kept the lineage, and the steps key now expires with the record key (one
    // whose reservation is shorter than the minute left to the steps, sooner: at its lease end).
    expect(both.completed).toEqual([true]);
    expect([claim, ...many, ...both.claimed].map((c) => c.claimed && c.attempt)).toEqual([
      4, 4, 4, 4,
    ]);
    for (const key of [single, batched, other, combined]) {
      expect(await stepsExpiry(key), key).toBe(await expiryOf(storeKey(key)));
    }
    expect(await stepsExpiry(single)).toBeGreaterThan((await redisNow()) + day - 60_000);
    expect(await stepsExpiry(other)).toBeLessThan((await redisNow()) + 31_000);
  });

  it("drops another request's steps: a takeover by another fingerprint starts with none", async () => {
    // Arrange: three keys whose dead claim of fp-a recorded a step. Its key has no reservation left (it
    // is written without an expiry: PEXPIRETIME reads -1), so another request may take it over.
    const keys = [randomUUID(), randomUUID(), randomUUID()];
    const createdAts: number[] = [];
    for (const key of keys) {
      const now = await redisNow();
      const createdAt = now - 5000;
      createdAts.push(createdAt);
      const value = `p|${now * 1000 - 5_000_000}|${now - 1000}|${createdAt}|1|fp-a`;
      await raw(['SET', storeKey(key), value]);
      await raw(['HSET', stepsKey(key), '#', `${createdAt}|fp-a`, 'charge', 'a']);
      await raw(['PEXPIRE', stepsKey(key), '60000']);
    }
    // Act
    const claims = await Promise.all(
      keys.map((key) => redis.store.claim(key, { fingerprint: 'fp-b', leaseMs: 60_000 })),
    );
    const [loaded, saved, extended] = keys as [string, string, string];
    const tokens = claims.map((c) => (c.claimed ? c.token : Number.NaN));
    const loadedSteps = await redis.store.loadSteps(loaded, tokens[0] as number);
    const savedOk = await redis.store.saveStep(
      saved,
      tokens[1] as number,
      'ship',
      Buffer.from('b'),
    );
    const savedSteps = await redis.store.loadSteps(saved, tokens[1] as number);
    const extendedOk = await redis.store.extend(extended, tokens[2] as number, 60_000);
    // Assert: a takeover (attempt 2, createdAt kept) by another request sees none of fp-a's steps, and
    // whichever step script (or lease extension) comes first deletes them.
    expect(claims.map((c) => c.claimed && c.attempt)).toEqual([2, 2, 2]);
    expect(loadedSteps).toEqual({});
    expect(await exists(stepsKey(loaded))).toBe(false);
    expect(savedOk).toBe(true);
    expect(Object.keys(savedSteps ?? {})).toEqual(['ship']);
    expect(await lineageOf(saved)).toBe(`${createdAts[1]}|fp-b`);
    expect(extendedOk).toBe(true);
    expect(await exists(stepsKey(extended))).toBe(false);
  });

  it('keeps the steps key expiring with the record when the lease is extended', async () => {
    // Arrange: a claim without reservation, so its key expires with its lease.
    const key = randomUUID();
    const claim = await redis.store.claim(key, { fingerprint: 'fp', leaseMs: 5_000 });
    if (!claim.claimed) throw new Error('claimed');
    await redis.store.saveStep(key, claim.token, 'charge', Buffer.from('x'));
    const before = await expiryOf(stepsKey(key));
    // Act
    const extended = await redis.store.extend(key, claim.token, 60_000);
    // Assert
    expect(before).toBe(claim.leaseUntil);
    expect(extended).toBe(true);
    expect(await expiryOf(stepsKey(key))).toBe(await expiryOf(storeKey(key)));
    expect(await expiryOf(stepsKey(key))).toBeGreaterThan(claim.leaseUntil + 50_000);
  });

  it('deletes the steps with a release or an admin delete, and keeps a fenced-out call from touching them', async () => {
    // Arrange
    const [released, deleted] = [randomUUID(), randomUUID()];
    const a = await redis.store.claim(released, {
      fingerprint: 'fp',
      leaseMs: 60_000,
      reserveMs: day,
    });
    const b = await redis.store.claim(deleted, {
      fingerprint: 'fp',
      leaseMs: 60_000,
      reserveMs: day,
    });
    if (!a.claimed || !b.claimed) throw new Error('claimed');
    await redis.store.saveStep(released, a.token, 'charge', Buffer.from('x'));
    await redis.store.saveStep(deleted, b.token, 'charge', Buffer.from('x'));
    // Act
    const wrongRelease = await redis.store.release(released, a.token + 1);
    const afterWrong = await exists(stepsKey(released));
    const releasedOk = await redis.store.release(released, a.token);
    const deletedOk = await redis.store.delete(deleted);
    // Assert
    expect(wrongRelease).toBe(false);
    expect(afterWrong).toBe(true);
    expect(releasedOk).toBe(true);
    expect(deletedOk).toBe(true);
    expect(await exists(stepsKey(released))).toBe(false);
    expect(await exists(stepsKey(deleted))).toBe(false);
    expect(await redis.store.saveStep(released, a.token, 'late', Buffer.from('x'))).toBe(false);
    expect(await exists(stepsKey(released))).toBe(false);
  });

  it('leaves a completed record’s steps to expire by themselves, unseen by the next claim', async () => {
    // Arrange: the completion does not touch the steps key (the hot path is one GET and one SET).
    const key = randomUUID();
    const claim = await redis.store.claim(key, {
      fingerprint: 'fp',
      leaseMs: 60_000,
      reserveMs: 120_000,
    });
    if (!claim.claimed) throw new Error('claimed');
    await redis.store.saveStep(key, claim.token, 'charge', Buffer.from('x'));
    // Act
    await redis.store.complete(key, claim.token, Buffer.from('done'), 1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const again = await redis.store.claim(key, { fingerprint: 'fp', leaseMs: 60_000 });
    if (!again.claimed) throw new Error('claimed again');
    const left = await expiryOf(stepsKey(key));
    const steps = await redis.store.loadSteps(key, again.token);
    // Assert: the old steps would have expired when the first claim's reservation ended; a fresh claim
    // (attempt 1, a new createdAt) does not see them, and its first step call deletes them.
    expect(left).toBe(Math.floor(claim.token / 1000) + 120_000);
    expect(again.attempt).toBe(1);
    expect(steps).toEqual({});
    expect(await exists(stepsKey(key))).toBe(false);
  });

  it('resumes a third attempt through the engine after the first claim’s reservation, when the second crashed at once', async () => {
    // Arrange: the first attempt records its charge and "dies"; the second takes the key over and dies
    // before its first step (and before a lease extension: none here).
    const idempotency = createIdempotency({
      store: redis.store,
      namespace: `steps-third-${lib}`,
      leaseMs: 400,
      retentionMs: 1200,
      extendLease: false,
      cache: false,
    });
    const key = randomUUID();
    const request = { key, payload: { amount: 5 } };
    const charge = vi.fn(() => ({ id: 'ch_1' }));
    await crashAfterCharge(idempotency, request, charge);
    await new Promise((resolve) => setTimeout(resolve, 500));
    let tookOver!: (attempt: number) => void;
    const secondAttempt = new Promise<number>((resolve) => (tookOver = resolve));
    void idempotency.run(request, (ctx) => {
      tookOver(ctx.attempt);
      return new Promise(() => {});
    });
    const second = await secondAttempt;
    // Past the first claim's reservation (1200 ms) and the second's lease, within the second's reservation.
    await new Promise((resolve) => setTimeout(resolve, 800));
    // Act
    const outcome = await idempotency.run(request, async (ctx) => ({
      charged: await ctx.step('charge', charge),
      attempt: ctx.attempt,
    }));
    // Assert: the charge recorded by the first attempt is replayed, never made again.
    expect(second).toBe(2);
    expect(charge).toHaveBeenCalledTimes(1);
    expect(outcome).toMatchObject({
      status: 'executed',
      value: { charged: { id: 'ch_1' }, attempt: 3 },
    });
  });

  it('resumes a crashed execution through the engine without running its finished step again', async () => {
    // Arrange: the first attempt records its charge, then "dies" (hangs without extending its lease).
    const idempotency = createIdempotency({
      store: redis.store,
      namespace: `steps-${lib}`,
      leaseMs: 600,
      extendLease: false,
      cache: false,
    });
    const key = randomUUID();
    const charge = vi.fn(() => ({ id: 'ch_1' }));
    const ship = vi.fn(() => 'shipped');
    await crashAfterCharge(idempotency, { key, payload: { amount: 5 } }, charge);
    await new Promise((resolve) => setTimeout(resolve, 750));
    // Act: the retry of the same request takes the key over.
    const outcome = await idempotency.run({ key, payload: { amount: 5 } }, async (ctx) => ({
      charged: await ctx.step('charge', charge),
      shipped: await ctx.step('ship', ship),
      attempt: ctx.attempt,
    }));
    // Assert
    expect(charge).toHaveBeenCalledTimes(1);
    expect(ship).toHaveBeenCalledTimes(1);
    expect(outcome).toMatchObject({
      status: 'executed',
      value: { charged: { id: 'ch_1' }, shipped: 'shipped', attempt: 2 },
    });
  });
});
