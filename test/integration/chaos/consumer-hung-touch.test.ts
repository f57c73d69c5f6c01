/**
 * A keep-alive touch that never settles (Redis Streams: the `XCLAIM … IDLE 0` that resets an entry's idle
 * time, sent on a connection hung without a command timeout, here cut by a TCP proxy in front of the real
 * Redis server). Before, the keep-alive waited for it without a word: the entry's idle time was no longer
 * reset and nothing was reported. Now the overdue touch is reported to `onBrokerError` with the key, and
 * the keep-alive goes on once the connection answers again. NATS's `working()` is sent without a reply,
 * so it cannot hang.
 */
import { randomUUID } from 'node:crypto';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../../../src/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { idempotentConsumer } from '../../../src/redis-streams/index.js';
import { env, requireService } from '../../helpers/env.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../../helpers/redis-clients.js';
import { startRedisProxy, type TcpProxy } from '../../helpers/tcp-proxy.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('a keep-alive touch that never settles: redis-streams', () => {
  const run = randomUUID().slice(0, 8);
  const prefix = `idemtest:hung-touch:${run}:`;
  const stream = `ik-test:hung-touch:${run}`;
  let redis: TestRedisClient;
  const admin = createClient({ url: env.redisUrl });
  let proxy: (TcpProxy & { url: string }) | undefined;
  const clients: Array<{ destroy(): void }> = [];
  let consumer: { close(): Promise<unknown> } | undefined;

  beforeAll(async () => {
    await requireService('Redis', env.redisUrl);
    redis = await connectClient('node-redis', env.redisUrl);
    await admin.connect();
  });

  afterAll(async () => {
    proxy?.restore();
    await consumer?.close().catch(() => {});
    for (const client of clients) client.destroy();
    await proxy?.close();
    if (redis !== undefined) {
      await deleteKeys(redis.client, prefix);
      await redis.close();
    }
    if (admin.isOpen) {
      await admin.sendCommand(['DEL', stream, `${stream}:dlq`]);
      admin.destroy();
    }
  });

  it('reports an overdue touch with the key while the link is cut, and goes on once it answers', async () => {
    // Arrange: the consumer's own client (acks, touches) goes through a proxy that can cut its link; the
    // store and the blocking reads do not.
    const cutProxy = await startRedisProxy(env.redisUrl);
    proxy = cutProxy;
    // No reconnect delay to speak of, and no command timeout: a cut link hangs each command.
    const client = createClient({ url: cutProxy.url, socket: { reconnectStrategy: () => 50 } });
    client.on('error', () => {});
    const blocking = createClient({ url: env.redisUrl });
    await Promise.all([client.connect(), blocking.connect()]);
    clients.push(client, blocking);
    const store = redisStore({ client: redis.client, prefix, checkEvictionPolicy: false });
    const touchErrors: Array<{ key: string | undefined; error: unknown }> = [];
    let reportedWhileCut = false;
    let calls = 0;
    let executed = 0;
    consumer = await idempotentConsumer(
      client,
      async () => {
        calls++;
        if (calls > 1) return;
        // The link hangs while the handler runs: the next touch (minIdle / 3 = 500 ms) never settles.
        cutProxy.cut();
        try {
          await waitUntil('a touch to be reported overdue', () => touchErrors.length > 0, 4_000);
          reportedWhileCut = true;
        } catch {
          // Before: never reported.
        }
        cutProxy.restore();
      },
      {
        idempotency: createIdempotency({ store, leaseMs: 10_000 }),
        name: 'worker-hung-touch',
        stream,
        group: 'workers',
        consumer: `hung-touch-${process.pid}`,
        blockingClient: blocking,
        block: '200ms',
        minIdle: 1500,
        claimInterval: '100ms',
        hooks: {
          onExecuted: () => void executed++,
          onBrokerError: ({ key, operation, error }) => {
            if (operation === 'touch') touchErrors.push({ key, error });
          },
        },
      },
    );

    // Act
    await admin.sendCommand(['XADD', stream, '*', 'x-idempotency-key', 'touch-1', 'body', 'x']);

    // Assert
    await waitUntil('the message to be executed and acked', () => executed === 1, 30_000);
    expect(reportedWhileCut).toBe(true);
    expect(touchErrors[0]?.key).toBe('touch-1');
    expect(String((touchErrors[0]?.error as Error | undefined)?.message)).toContain(
      'has not settled',
    );
    expect(calls).toBe(1);
  });
});
