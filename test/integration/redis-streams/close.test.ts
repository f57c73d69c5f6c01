/**
 * The Redis Streams consumer's `close()` when Redis hangs without closing the connection (a network
 * partition): node-redis never times out a command it has already written, so the blocking read in progress
 * never returns, and `close()` must not wait for it past `drainTimeout`. Nothing that read brings later may
 * start behind a `close()` that has returned.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer, type RedisStreamsClient } from '../../../src/redis-streams/index.js';
import { env, requireService } from '../../helpers/env.js';
import { connectClient, type TestRedisClient } from '../../helpers/redis-clients.js';
import { startRedisProxy, type TcpProxy } from '../../helpers/tcp-proxy.js';

describe('Redis Streams consumer: close() on a hung Redis', () => {
  const stream = `ik-test:streams-close:${randomUUID().slice(0, 8)}`;
  let admin: ReturnType<typeof createClient>;
  let proxy: TcpProxy & { url: string };
  let proxied: TestRedisClient;
  let blocking: TestRedisClient;

  beforeAll(async () => {
    await requireService('Redis', env.redisUrl);
    admin = createClient({ url: env.redisUrl });
    await admin.connect();
    proxy = await startRedisProxy(env.redisUrl);
    proxied = await connectClient('node-redis', proxy.url);
    blocking = await connectClient('node-redis', proxy.url);
  });

  afterAll(async () => {
    proxy?.restore();
    await proxied?.close().catch(() => {});
    await blocking?.close().catch(() => {});
    await proxy?.close();
    await admin?.sendCommand(['DEL', stream, `${stream}:dlq`]);
    admin?.destroy();
  });

  it('resolves false within drainTimeout while its read gets no answer, and starts nothing a late reply brings', async () => {
    // Arrange: a consumer blocked in XREADGROUP through the proxy, which then stops forwarding.
    let handled = 0;
    const consumer = await idempotentConsumer(
      proxied.client as unknown as RedisStreamsClient,
      () => {
        handled++;
      },
      {
        stream,
        group: 'workers',
        name: 'closing',
        idempotency: createIdempotency({ store: memoryStore() }),
        blockingClient: blocking.client as unknown as RedisStreamsClient,
        block: '1s',
        drainTimeout: '500ms',
      },
    );
    await admin.sendCommand(['XADD', stream, '*', 'x-idempotency-key', 'before']);
    const deadline = Date.now() + 5000;
    while (handled < 1 && Date.now() < deadline) await sleep(10);
    expect(handled).toBe(1);
    await sleep(100); // the loop is back in its blocking read
    proxy.cut();
    // Act
    const started = performance.now();
    const closed = await Promise.race([consumer.close(), sleep(5000).then(() => 'hung' as const)]);
    const elapsed = performance.now() - started;
    // Assert: the drain timeout bounds close(), the hung read included.
    expect(closed).toBe(false);
    expect(elapsed).toBeLessThan(2000);
    // A reply after the close (the link back, an entry waiting) starts nothing.
    await admin.sendCommand(['XADD', stream, '*', 'x-idempotency-key', 'after']);
    proxy.restore();
    await Promise.race([consumer.done, sleep(5000)]);
    await sleep(200);
    expect(handled).toBe(1);
  });
});
