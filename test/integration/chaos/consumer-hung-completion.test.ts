/**
 * A consumer given an engine instance (no `lease` of its own) over a store whose completion never answers
 * (a third-party store without timeouts, here a real Redis store wrapped so): the delivery is kept alive
 * for at most the execution's lease after the handler settled, then left to the broker, which redelivers
 * it; the hang is reported to `onBrokerError`, and the message is never acked without a durable completion.
 * Real NATS JetStream and Redis Streams.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, isStoreUnavailableError, type Store } from '../../../src/index.js';
import { type RedisStore, redisStore } from '../../../src/redis/index.js';
import {
  type BrokerCase,
  type BrokerName,
  openBrokerCase,
  type RunningConsumer,
} from '../../helpers/consumer-brokers.js';
import { env, requireService } from '../../helpers/env.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../../helpers/redis-clients.js';
import { waitUntil } from '../../helpers/wait-until.js';

const LEASE_MS = 1_000;

/** `store`, except that its first completion never settles (the later ones go through). */
function firstCompletionHangs(store: RedisStore): { store: Store; completions: () => number } {
  let completions = 0;
  const wrapped = Object.create(store) as Store;
  wrapped.complete = (...args: Parameters<Store['complete']>) => {
    completions++;
    return completions === 1 ? new Promise<boolean>(() => {}) : store.complete(...args);
  };
  return { store: wrapped, completions: () => completions };
}

const SERVICE: Record<'nats' | 'redis-streams', [string, string]> = {
  nats: ['NATS', env.natsUrl],
  'redis-streams': ['Redis', env.redisUrl],
};

describe.each(['nats', 'redis-streams'] as const)(
  'a completion that never answers: %s',
  (broker) => {
    const run = randomUUID().slice(0, 8);
    const prefix = `idemtest:hung-completion:${broker}:${run}:`;
    let redis: TestRedisClient;
    let brokerCase: BrokerCase | undefined;
    let consumer: RunningConsumer | undefined;

    beforeAll(async () => {
      await requireService(...SERVICE[broker]);
      await requireService('Redis', env.redisUrl);
      redis = await connectClient('node-redis', env.redisUrl);
    });

    afterAll(async () => {
      await consumer?.close().catch(() => {});
      await brokerCase?.destroy().catch(() => {});
      if (redis !== undefined) {
        await deleteKeys(redis.client, prefix);
        await redis.close();
      }
    });

    it('keeps the delivery alive a lease at most, reports it, and lets the broker redeliver it (never acked)', async () => {
      // Arrange
      brokerCase = await openBrokerCase(broker as BrokerName, `${run}-hung-complete`);
      const real = redisStore({ client: redis.client, prefix, checkEvictionPolicy: false });
      const { store, completions } = firstCompletionHangs(real);
      const deliveries: number[] = [];
      const brokerErrors: Array<{ operation: string; error: unknown }> = [];
      let executed = 0;
      // Act: an engine instance, and no `lease` on the consumer: only the engine knows its lease.
      consumer = await brokerCase.start(
        (_message, context) => {
          deliveries.push(context.deliveryCount);
        },
        {
          idempotency: createIdempotency({ store, leaseMs: LEASE_MS }),
          name: 'worker-hung-complete',
          drainTimeout: '100ms',
          minRetryDelay: '100ms',
          maxRetryDelay: '300ms',
          hooks: {
            onExecuted: () => void executed++,
            onBrokerError: ({ operation, error }) => brokerErrors.push({ operation, error }),
          },
        },
      );
      await brokerCase.publish('hung-complete-1', 'work');
      // Assert: the broker's redelivery (no copy was published) takes the key over once the first
      // execution's lease ran out, and runs it again, as after a crash; before, the first delivery was kept
      // alive for as long as the process lived, and never came back.
      await waitUntil('the broker to redeliver the message', () => deliveries.length === 2, 20_000);
      await waitUntil('the redelivery to be executed and acked', () => executed === 1, 10_000);
      expect(deliveries[1]).toBeGreaterThan(1);
      expect(completions()).toBe(2);
      const given = brokerErrors.filter(({ operation }) => operation === 'touch');
      expect(given).toHaveLength(1);
      expect(isStoreUnavailableError(given[0]?.error)).toBe(true);
    });
  },
);
