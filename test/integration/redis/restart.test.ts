import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { isStoreUnavailableError } from '../../../src/core/errors.js';
import { redisStore } from '../../../src/redis/index.js';
import { env, requireService } from '../../helpers/env.js';
import { connectClient, type RedisLib } from '../../helpers/redis-clients.js';
import { freePorts, PORT_SLICES, PrivateRedis } from '../../helpers/redis-servers.js';

const TIMEOUT_MS = 500;

// Every rejection must reach a caller: a late failure of a timed-out call may never go unhandled.
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);

beforeAll(async () => {
  await requireService('Redis', env.redisUrl);
  process.on('unhandledRejection', onUnhandled);
});

afterAll(() => {
  process.off('unhandledRejection', onUnhandled);
});

describe.each<RedisLib>(['node-redis', 'ioredis'])(
  'redis store across a Redis restart (%s)',
  (lib) => {
    let server: PrivateRedis;

    beforeEach(async () => {
      const [port] = await freePorts(PORT_SLICES.restart);
      // Every write fsynced to the AOF: a kill -9 loses nothing, as a durable deployment would be set up.
      server = new PrivateRedis(port!, ['--appendonly', 'yes', '--appendfsync', 'always']);
      await server.start();
    });

    afterEach(async () => {
      await server.dispose();
    });

    it('fails closed quickly during the outage and keeps every claim after it (no duplicate)', async () => {
      // Arrange: one live claim and one completed record, then kill -9 the server.
      const connection = await connectClient(lib, server.url);
      const store = redisStore({
        client: connection.client,
        prefix: 'restart:',
        timeoutMs: TIMEOUT_MS,
      });
      const held = await store.claim('held', { fingerprint: 'fp', leaseMs: 120_000 });
      const done = await store.claim('done', { fingerprint: 'fp', leaseMs: 120_000 });
      expect(held.claimed && done.claimed).toBe(true);
      if (!held.claimed || !done.claimed) return;
      expect(await store.complete('done', done.token, Uint8Array.of(0, 1, 2, 255), 600_000)).toBe(
        true,
      );
      await server.kill();

      // Act: every kind of call during the outage.
      const outage = ['claim', 'complete', 'extend', 'release', 'get', 'delete', 'stats'] as const;
      const results = await Promise.all(
        outage.map(async (operation) => {
          const started = Date.now();
          const call =
            operation === 'claim'
              ? store.claim('held', { fingerprint: 'fp', leaseMs: 120_000 })
              : operation === 'complete'
                ? store.complete('held', held.token, Uint8Array.of(9), 600_000)
                : operation === 'extend'
                  ? store.extend('held', held.token, 120_000)
                  : operation === 'release'
                    ? store.release('other', 1)
                    : operation === 'get'
                      ? store.get('held')
                      : operation === 'delete'
                        ? store.delete('other')
                        : store.stats();
          const error = await call.then(
            () => undefined,
            (e: unknown) => e,
          );
          return { operation, error, elapsed: Date.now() - started };
        }),
      );

      // Assert: each call failed closed with StoreUnavailableError, bounded by the timeout (plus slack for a
      // loaded machine), and none hung.
      for (const { operation, error, elapsed } of results) {
        expect(isStoreUnavailableError(error), `${operation}: ${String(error)}`).toBe(true);
        expect(elapsed, operation).toBeLessThan(TIMEOUT_MS + 2000);
      }

      // Act: bring the server back (same dir: the AOF is replayed; the script cache is empty).
      await server.start();
      const deadline = Date.now() + 15_000;
      let probe: Awaited<ReturnType<typeof store.claim>> | undefined;
      while (probe === undefined && Date.now() < deadline) {
        probe = await store
          .claim('probe', { fingerprint: 'fp', leaseMs: 60_000 })
          .catch(() => undefined);
        if (probe === undefined) await sleep(100);
      }

      // Assert: the store works again, the live claim survived (a second claim is refused, not a duplicate
      // winner), its holder can still complete it, and the stored outcome replays byte-exact.
      expect(probe?.claimed).toBe(true);
      const again = await store.claim('held', { fingerprint: 'fp', leaseMs: 120_000 });
      expect(again.claimed).toBe(false);
      if (!again.claimed) expect(again.record.token).toBe(held.token);
      expect(await store.complete('held', held.token, Uint8Array.of(7), 600_000)).toBe(true);
      const replay = await store.claim('done', { fingerprint: 'fp', leaseMs: 120_000 });
      expect(replay.claimed).toBe(false);
      if (!replay.claimed && replay.record.status === 'completed') {
        expect([...replay.record.outcome]).toEqual([0, 1, 2, 255]);
      } else {
        expect.fail('the completed record must survive the restart');
      }
      await connection.close();
      await sleep(TIMEOUT_MS);
      expect(unhandled).toEqual([]);
    }, 60_000);
  },
);
