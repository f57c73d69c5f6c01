/**
 * Fencing tokens of the Redis store when Redis's clock is behind the token of the record it takes over, as
 * after the clock stepped back under a live claim (whose holder then extended its lease by the stepped-back
 * clock, and died): every claim script raises the token to the previous one + 1, so the fenced-out holder's
 * token never matches again. (A key that no longer exists leaves nothing to raise a token above: see
 * docs/stores/redis.md, "Fencing tokens".)
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { ClaimResult } from '../../../src/index.js';
import type { RedisStore } from '../../../src/redis/index.js';
import type { RedisLib } from '../../helpers/redis-clients.js';
import { rawRedisStore, redisClientsForFile } from '../../helpers/redis-file-connection.js';

const prefix = `idemtest:token-above-clock:${randomUUID().slice(0, 8)}:`;
const clients = redisClientsForFile(prefix);
const HOUR = 3_600_000;
const claimOf = (key: string) => ({ key, fingerprint: 'fp', leaseMs: 60_000, reserveMs: HOUR });

describe.each<RedisLib>(['node-redis', 'ioredis'])('redis tokens above the clock (%s)', (lib) => {
  const redis = rawRedisStore(clients, lib, prefix);

  it.each<[string, (store: RedisStore, key: string) => Promise<ClaimResult | undefined>]>([
    ['claim', (store, key) => store.claim(key, claimOf(key))],
    [
      'claimMany',
      async (store, key) => (await store.claimMany([claimOf(key), claimOf(randomUUID())]))[0],
    ],
    [
      'completeAndClaimMany',
      async (store, key) =>
        (
          await store.completeAndClaimMany(
            [{ key: randomUUID(), token: 1, outcome: Uint8Array.of(1), retentionMs: 1000 }],
            [claimOf(key)],
          )
        ).claimed[0],
    ],
  ])(
    'takes over with the dead holder’s token + 1 through %s, fencing that holder',
    async (_, claim) => {
      // Arrange: a dead lease whose token is an hour ahead of Redis's clock, its key still reserved.
      const key = randomUUID();
      const now = await redis.redisNow();
      const stale = (now + HOUR) * 1000;
      await redis.raw([
        'SET',
        redis.storeKey(key),
        `p|${stale}|${now - 1000}|${now - 5000}|1|fp`,
        'PXAT',
        String(now + HOUR),
      ]);
      // Act
      const takeover = await claim(redis.store, key);
      const staleCompletes = await redis.store.complete(key, stale, Uint8Array.of(1), 60_000);
      // Assert
      expect(takeover).toMatchObject({ claimed: true, token: stale + 1, attempt: 2 });
      expect(staleCompletes).toBe(false);
      expect(await redis.store.complete(key, stale + 1, Uint8Array.of(2), 60_000)).toBe(true);
    },
  );
});
