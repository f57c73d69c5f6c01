import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createIdempotency, isStoreUnavailableError } from '../../../src/index.js';
import { withBatching } from '../../../src/store/batching.js';
import type { RedisLib } from '../../helpers/redis-clients.js';
import { rawRedisStore, redisClientsForFile } from '../../helpers/redis-file-connection.js';

// The record encoding (one string per record) and the batch scripts, on the shared server, for both clients.
const prefix = `idemtest:enc:${randomUUID().slice(0, 8)}:`;
const clients = redisClientsForFile(prefix);
const day = 86_400_000;
const lease = { fingerprint: 'fp', leaseMs: 60_000 };

describe.each<RedisLib>(['node-redis', 'ioredis'])(
  'redis record encoding and batches (%s)',
  (lib) => {
    const redis = rawRedisStore(clients, lib, prefix);
    const { raw, storeKey } = redis;

    it('declares batches on a single node', () => {
      // Arrange + Act + Assert
      expect(redis.store.capabilities.batch).toBe(true);
    });

    it('round-trips 16-digit tokens exactly, single and batched, and stores them as exact decimal text', async () => {
      // Arrange
      const [single, batched] = [randomUUID(), randomUUID()];
      // Act
      const one = await redis.store.claim(single, { fingerprint: 'fp', leaseMs: 60_000 });
      const [many] = await redis.store.claimMany([
        { key: batched, fingerprint: 'fp', leaseMs: 60_000 },
        { key: randomUUID(), fingerprint: 'fp', leaseMs: 60_000 },
      ]);
      // Assert: Redis TIME in µs has 16 digits; a 14-digit tostring() would have rounded it.
      expect(one.claimed && many?.claimed).toBe(true);
      if (!one.claimed || !many?.claimed) return;
      for (const [key, token] of [
        [single, one.token],
        [batched, many.token],
      ] as const) {
        expect(String(token)).toMatch(/^\d{16}$/);
        const value = String(await raw(['GET', storeKey(key)]));
        expect(value).toMatch(new RegExp(`^p\\|${token}\\|\\d{13}\\|\\d{13}\\|1\\|fp$`));
        const record = await redis.store.get(key);
        expect(record?.token).toBe(token);
      }
      expect(one.leaseUntil).toBe(Math.floor(one.token / 1000) + 60_000);
    });

    it('raises the token above a 16-digit tombstone exactly, on the single and the batch script', async () => {
      // Arrange: tombstones from "the future" force the previous-token + 1 branch with 16-digit numbers.
      const [single, batched] = [randomUUID(), randomUUID()];
      for (const key of [single, batched]) {
        await raw(['SET', storeKey(key), 'r|8999999999999999', 'PX', '60000']);
      }
      // Act
      const one = await redis.store.claim(single, { fingerprint: 'fp', leaseMs: 60_000 });
      const [many] = await redis.store.claimMany([
        { key: batched, fingerprint: 'fp', leaseMs: 60_000 },
        { key: batched, fingerprint: 'fp2', leaseMs: 60_000 },
      ]);
      // Assert
      for (const [key, result] of [
        [single, one],
        [batched, many],
      ] as const) {
        expect(result).toMatchObject({ claimed: true, token: 9_000_000_000_000_000, attempt: 1 });
        if (!result?.claimed) continue;
        // The lease end comes from Redis's clock, not from the raised token.
        expect(Math.abs(result.leaseUntil - (Date.now() + 60_000))).toBeLessThan(30_000);
        expect(await redis.store.complete(key, result.token, Buffer.from('ok'), day)).toBe(true);
        expect(await redis.store.get(key)).toMatchObject({
          status: 'completed',
          token: 9_000_000_000_000_000,
        });
      }
    });

    it('applies each item its own lease and retention in a mixed batch, and a shared one once', async () => {
      // The batch scripts send a lease (retention) once when every item shares it, and per item otherwise.
      const keys = [randomUUID(), randomUUID(), randomUUID()];
      const leases = [10_000, 20_000, 30_000];
      const claims = await redis.store.claimMany(
        keys.map((key, i) => ({ key, fingerprint: `fp${i}`, leaseMs: leases[i]! })),
      );
      const tokens = claims.map((claim, i) => {
        if (!claim.claimed) throw new Error(`item ${i} not claimed`);
        expect(claim.leaseUntil - Math.floor(claim.token / 1000)).toBe(leases[i]);
        return claim.token;
      });
      const ttls = await Promise.all(keys.map((key) => raw(['PTTL', storeKey(key)])));
      ttls.forEach((ttl, i) => {
        expect(Number(ttl)).toBeGreaterThan(leases[i]! - 2_000);
        expect(Number(ttl)).toBeLessThanOrEqual(leases[i]!);
      });
      const retentions = [100_000, 200_000, 300_000];
      const done = await redis.store.completeMany(
        keys.map((key, i) => ({
          key,
          token: tokens[i]!,
          outcome: Buffer.from(`o${i}é`),
          retentionMs: retentions[i]!,
        })),
      );
      expect(done).toEqual([true, true, true]);
      for (const [i, key] of keys.entries()) {
        const record = await redis.store.get(key);
        expect(record?.status).toBe('completed');
        if (record?.status !== 'completed') continue;
        expect(record.fingerprint).toBe(`fp${i}`);
        expect(Buffer.from(record.outcome).toString()).toBe(`o${i}é`);
        expect(record.expiresAt - record.completedAt).toBe(retentions[i]);
      }
      // Shared lease and retention, empty fingerprints, binary outcomes.
      const shared = [randomUUID(), randomUUID()];
      const sharedClaims = await redis.store.claimMany(
        shared.map((key) => ({ key, fingerprint: '', leaseMs: 5_000 })),
      );
      const sharedDone = await redis.store.completeMany(
        shared.map((key, i) => {
          const claim = sharedClaims[i];
          if (!claim?.claimed) throw new Error(`shared item ${i} not claimed`);
          expect(claim.leaseUntil - Math.floor(claim.token / 1000)).toBe(5_000);
          return {
            key,
            token: claim.token,
            outcome: Uint8Array.of(1, 0, 0x75),
            retentionMs: 7_000,
          };
        }),
      );
      expect(sharedDone).toEqual([true, true]);
      for (const key of shared) {
        const record = await redis.store.get(key);
        expect(record?.status === 'completed' && record.expiresAt - record.completedAt).toBe(7_000);
        expect(record?.status === 'completed' && [...record.outcome]).toEqual([1, 0, 0x75]);
      }
    });

    it('keeps every byte of an outcome through completeMany, separators and invalid UTF-8 included', async () => {
      // Arrange
      const keys = [randomUUID(), randomUUID()];
      const claims = await redis.store.claimMany(
        keys.map((key) => ({ key, fingerprint: 'f|p é', leaseMs: 60_000 })),
      );
      const everyByte = Uint8Array.from({ length: 256 }, (_, i) => i);
      // A plain Uint8Array view into a larger buffer: only its own bytes may be stored.
      const backing = Buffer.from(`xx|c|1|2|3|${'|'.repeat(10)}yy`);
      const view = new Uint8Array(backing.buffer, backing.byteOffset + 2, 20);
      // Act
      const results = await redis.store.completeMany(
        keys.map((key, i) => {
          const claim = claims[i];
          if (!claim?.claimed) throw new Error('claimed');
          return { key, token: claim.token, outcome: i === 0 ? everyByte : view, retentionMs: day };
        }),
      );
      // Assert
      expect(results).toEqual([true, true]);
      const [first, second] = await Promise.all(keys.map((key) => redis.store.get(key)));
      expect(first?.status === 'completed' && [...first.outcome]).toEqual([...everyByte]);
      expect(second?.status === 'completed' && [...second.outcome]).toEqual([...view]);
      expect(first?.fingerprint).toBe('f|p é');
    });

    it('fences a batch item by item: wrong, unsafe and stale tokens fail alone', async () => {
      // Arrange
      const [a, b] = [randomUUID(), randomUUID()];
      const claims = await redis.store.claimMany([
        { key: a, fingerprint: 'fp', leaseMs: 60_000 },
        { key: b, fingerprint: 'fp', leaseMs: 60_000 },
      ]);
      const [ca, cb] = claims;
      if (!ca?.claimed || !cb?.claimed) throw new Error('claimed');
      // Act
      const results = await redis.store.completeMany([
        { key: a, token: Number.MAX_SAFE_INTEGER + 2, outcome: Buffer.from('x'), retentionMs: day },
        { key: a, token: ca.token - 1, outcome: Buffer.from('x'), retentionMs: day },
        { key: b, token: cb.token, outcome: Buffer.from('b'), retentionMs: day },
        { key: a, token: ca.token, outcome: Buffer.from('a'), retentionMs: day },
      ]);
      // Assert
      expect(results).toEqual([false, false, true, true]);
      expect(await redis.store.release(a, ca.token)).toBe(false);
      expect(await redis.store.completeMany([])).toEqual([]);
      expect(await redis.store.claimMany([])).toEqual([]);
    });

    it('fails a batch item whose record another program overwrote alone: the others are applied and answered', async () => {
      // Arrange: two records this layout cannot use (another type, an unreadable string), as a foreign
      // writer under the prefix leaves them. The batch script used to abort at such an item: the items
      // before it stayed claimed, those after it were never applied, and every caller was told the store
      // was unavailable (a retry of a key claimed that way got "in progress" until its lease ran out).
      const idempotency = createIdempotency({ store: redis.store, extendLease: false });
      const scopes = Array.from({ length: 5 }, () => randomUUID());
      const [hash, text] = [scopes[1], scopes[3]].map((scope) =>
        idempotency.storageKeyFor('k', scope),
      ) as [string, string];
      await raw(['HSET', storeKey(hash), 'field', 'value']);
      await raw(['SET', storeKey(text), 'garbage']);
      // Act: five runs in one tick, so one claimMany.
      const runs = await Promise.allSettled(
        scopes.map((scope) => idempotency.run({ key: 'k', scope }, () => scope)),
      );
      const alone = randomUUID();
      const direct = await redis.store
        .claimMany([text, alone].map((key) => ({ key, fingerprint: 'fp', leaseMs: 60_000 })))
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      // Assert: the runs on the overwritten records fail (503), the others run; the values are untouched.
      for (const i of [0, 2, 4]) {
        expect(runs[i]).toMatchObject({ status: 'fulfilled', value: { status: 'executed' } });
      }
      for (const i of [1, 3]) {
        const run = runs[i];
        expect(run?.status === 'rejected' && isStoreUnavailableError(run.reason)).toBe(true);
      }
      expect(String(await raw(['GET', storeKey(text)]))).toBe('garbage');
      // A direct caller of claimMany still gets one rejection, but no item after the bad one is lost.
      expect(isStoreUnavailableError(direct)).toBe(true);
      expect((await redis.store.get(alone))?.status).toBe('in_progress');
    });

    it('fails an overwritten record alone in a batch of completions, and beside claims', async () => {
      // Arrange: two claims, then one record overwritten with another type before its completion.
      const batched = withBatching(redis.store, { maxInFlight: 1 });
      const claim = (key: string) => batched.claim(key, { fingerprint: 'fp', leaseMs: 60_000 });
      const [a, b, c, d, bad] = Array.from({ length: 5 }, () => randomUUID()) as [
        string,
        string,
        string,
        string,
        string,
      ];
      const [ca, cb, cc] = await redis.store.claimMany([a, b, c].map((key) => ({ key, ...lease })));
      if (!ca?.claimed || !cb?.claimed || !cc?.claimed) throw new Error('claimed');
      await raw(['DEL', storeKey(b)]);
      await raw(['HSET', storeKey(b), 'field', 'value']);
      await raw(['SET', storeKey(bad), 'garbage']);
      const outcome = Uint8Array.of(1, 0, 0x75);
      // Act: two completions in one tick (completeMany), then a completion and two claims in one tick
      // (completeAndClaimMany).
      const completes = await Promise.allSettled([
        batched.complete(b, cb.token, outcome, day),
        batched.complete(a, ca.token, outcome, day),
      ]);
      const mixed = await Promise.allSettled([
        batched.complete(c, cc.token, outcome, day),
        claim(bad),
        claim(d),
      ]);
      // Assert
      expect(
        completes[0].status === 'rejected' && isStoreUnavailableError(completes[0].reason),
      ).toBe(true);
      expect(completes[1]).toEqual({ status: 'fulfilled', value: true });
      expect(mixed[0]).toEqual({ status: 'fulfilled', value: true });
      expect(mixed[1].status === 'rejected' && isStoreUnavailableError(mixed[1].reason)).toBe(true);
      expect(mixed[2].status === 'fulfilled' && mixed[2].value.claimed).toBe(true);
      expect((await redis.store.get(a))?.status).toBe('completed');
      expect((await redis.store.get(c))?.status).toBe('completed');
    });

    it('claims after a release with a larger token, in a batch too, and hides the tombstone', async () => {
      // Arrange
      const key = randomUUID();
      const first = await redis.store.claim(key, { fingerprint: 'fp', leaseMs: 60_000 });
      if (!first.claimed) throw new Error('claimed');
      // Act
      const released = await redis.store.release(key, first.token);
      const absent = await redis.store.get(key);
      const [again] = await redis.store.claimMany([
        { key, fingerprint: 'fp', leaseMs: 60_000 },
        { key: randomUUID(), fingerprint: 'fp', leaseMs: 60_000 },
      ]);
      // Assert
      expect(released).toBe(true);
      expect(absent).toBeUndefined();
      expect(again?.claimed && again.token > first.token).toBe(true);
    });
  },
);
