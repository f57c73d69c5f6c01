/**
 * Fingerprints holding an unpaired surrogate in the Redis store. Both clients send text as UTF-8, where
 * such a fingerprint has no form: U+FFFD went in its place, so the same request's retry read back another
 * fingerprint (a mismatch), and every lone half compared equal in the scripts (a crashed claim's
 * reservation, and its recorded steps, taken over by another request). The store keeps its digest instead
 * (`src/core/stored-fingerprint.ts`) on every claim path; every other fingerprint is stored as is.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { fingerprintDigest } from '../../../src/core/stored-fingerprint.js';
import { createIdempotency } from '../../../src/index.js';
import type { RedisLib } from '../../helpers/redis-clients.js';
import { rawRedisStore, redisClientsForFile } from '../../helpers/redis-file-connection.js';

const prefix = `idemtest:lone-fp:${randomUUID().slice(0, 8)}:`;
const clients = redisClientsForFile(prefix);
const DAY = 86_400_000;
// The same request twice, and two others that UTF-8 makes alike: another lone half, and U+FFFD itself.
const LONE = 'POST /pay amount=100 memo=\ud83d';
const OTHER_LONE = 'POST /pay amount=100 memo=\udc00';
const REPLACEMENT = 'POST /pay amount=100 memo=\ufffd';

describe.each<RedisLib>(['node-redis', 'ioredis'])(
  'redis store: fingerprints with a lone surrogate (%s)',
  (lib) => {
    const redis = rawRedisStore(clients, lib, prefix);
    const { raw, storeKey } = redis;
    // Two engines without the local cache of completed records: two processes sharing the store.
    const engines = () => {
      const engine = () =>
        createIdempotency({ store: redis.store, cache: false, extendLease: false, batch: false });
      return { first: engine(), second: engine() };
    };

    it("replays the same request's retry from another engine instead of answering a mismatch", async () => {
      // Arrange
      const { first, second } = engines();
      const key = randomUUID();
      let charges = 0;
      const charge = () => ++charges;
      // Act
      const executed = await first.run({ key, fingerprint: LONE }, charge);
      const retried = await second.run({ key, fingerprint: LONE }, charge);
      // Assert
      expect(executed.status).toBe('executed');
      expect(retried).toMatchObject({ status: 'replayed', value: 1 });
      expect(charges).toBe(1);
    });

    it('answers a mismatch to a request that differs only in its lone surrogate, or has U+FFFD there', async () => {
      // Arrange
      const { first, second } = engines();
      const key = randomUUID();
      await first.run({ key, fingerprint: LONE }, () => 'charged');
      // Act
      const other = await second.run({ key, fingerprint: OTHER_LONE }, () => 'again');
      const replacement = await second.run({ key, fingerprint: REPLACEMENT }, () => 'again');
      // Assert
      expect(other.status).toBe('mismatch');
      expect(replacement.status).toBe('mismatch');
    });

    it('answers a claim in flight with the request’s own fingerprint on every claim path', async () => {
      // Arrange
      const key = randomUUID();
      const claim = { key, fingerprint: LONE, leaseMs: 60_000 };
      await redis.store.claim(key, claim);
      // Act
      const single = await redis.store.claim(key, claim);
      const batched = await redis.store.claimMany([claim, { ...claim, key: randomUUID() }]);
      const combined = await redis.store.completeAndClaimMany(
        [{ key: randomUUID(), token: 1, outcome: Uint8Array.of(1), retentionMs: 1000 }],
        [claim],
      );
      const other = await redis.store.claim(key, { ...claim, fingerprint: OTHER_LONE });
      // Assert
      for (const result of [single, batched[0], combined.claimed[0]]) {
        expect(result).toMatchObject({ claimed: false, record: { fingerprint: LONE } });
      }
      expect(other).toMatchObject({
        claimed: false,
        record: { fingerprint: fingerprintDigest(LONE) },
      });
    });

    it("lets only the same request take over a crashed claim's reservation, with its recorded steps", async () => {
      // Arrange: the holder recorded a step, then its lease was ended by hand (as if it had crashed).
      const key = randomUUID();
      const crashed = await redis.store.claim(key, {
        fingerprint: LONE,
        leaseMs: 60_000,
        reserveMs: DAY,
      });
      if (!crashed.claimed) throw new Error('claimed');
      await redis.store.saveStep(key, crashed.token, 'charge', Uint8Array.of(7));
      const value = String(await raw(['GET', storeKey(key)]));
      const [status, token, , ...rest] = value.split('|');
      await raw(['SET', storeKey(key), [status, token, '1', ...rest].join('|'), 'KEEPTTL']);
      // Act
      const other = await redis.store.claim(key, {
        fingerprint: REPLACEMENT,
        leaseMs: 60_000,
        reserveMs: DAY,
      });
      const same = await redis.store.claim(key, {
        fingerprint: LONE,
        leaseMs: 60_000,
        reserveMs: DAY,
      });
      // Assert
      expect(other.claimed).toBe(false);
      expect(same).toMatchObject({ claimed: true, attempt: 2 });
      if (!same.claimed) throw new Error('claimed');
      expect(await redis.store.loadSteps(key, same.token)).toEqual({ charge: Uint8Array.of(7) });
    });

    it('stores such a fingerprint as its digest, and every other one as it is', async () => {
      // Arrange
      const kept = ['ab', 'a\u0000b', '😀 é|x', 'ik-fp:sha256:00', ''];
      const lone = randomUUID();
      const keys = kept.map(() => randomUUID());
      // Act
      await redis.store.claim(lone, { fingerprint: LONE, leaseMs: 60_000 });
      for (const [i, fingerprint] of kept.entries()) {
        await redis.store.claim(keys[i] as string, { fingerprint, leaseMs: 60_000 });
      }
      // Assert
      expect(await redis.store.get(lone)).toMatchObject({ fingerprint: fingerprintDigest(LONE) });
      for (const [i, fingerprint] of kept.entries()) {
        expect(await redis.store.get(keys[i] as string)).toMatchObject({ fingerprint });
      }
    });
  },
);
