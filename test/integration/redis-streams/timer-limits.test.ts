/**
 * Durations of the Redis Streams consumer past a timer's limit (2^31-1 ms, about 24.8 days), which Node
 * fires at once: a `minIdle` of months (its idle resets every `minIdle / 3`) must not reset a running
 * entry's idle time in a loop, against a real Redis.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/redis-streams/index.js';
import { env, requireService } from '../../helpers/env.js';
import { waitUntil } from '../../helpers/wait-until.js';

type Client = ReturnType<typeof createClient>;
type ConsumerClient = Parameters<typeof idempotentConsumer>[0];

describe('Redis Streams consumer: durations past a timer’s limit', () => {
  const stream = `ik-test:streams-timer-limits:${randomUUID().slice(0, 8)}`;
  let client: Client;
  let blocking: Client;

  beforeAll(async () => {
    await requireService('Redis', env.redisUrl);
    client = createClient({ url: env.redisUrl });
    blocking = client.duplicate();
    await Promise.all([client.connect(), blocking.connect()]);
  });

  afterAll(async () => {
    await client?.sendCommand(['DEL', stream, `${stream}:dlq`]);
    client?.destroy();
    blocking?.destroy();
  });

  it('resets a running entry’s idle time no sooner than the timer limit with a minIdle of 100 days', async () => {
    // Arrange: the client as the consumer sees it, counting XCLAIMs (the idle resets).
    let claims = 0;
    const counting = {
      sendCommand: (args: string[]) => {
        if (args[0] === 'XCLAIM') claims++;
        return client.sendCommand(args);
      },
    };
    let running = false;
    let finished = false;
    const consumer = await idempotentConsumer(
      counting as unknown as ConsumerClient,
      async () => {
        running = true;
        await sleep(500);
        finished = true;
      },
      {
        stream,
        group: 'workers',
        name: 'timer-limits',
        idempotency: createIdempotency({ store: memoryStore() }),
        blockingClient: blocking as unknown as ConsumerClient,
        block: '200ms',
        minIdle: '100d',
      },
    );
    // Act
    await client.sendCommand(['XADD', stream, '*', 'x-idempotency-key', 'long-idle']);
    await waitUntil('the handler to finish', () => finished, 10_000, 10);
    await consumer.close();
    // Assert: the handler ran once, for half a second: no reset was due.
    expect(running).toBe(true);
    expect(claims).toBe(0);
  });
});
