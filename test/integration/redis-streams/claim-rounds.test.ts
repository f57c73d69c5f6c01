/**
 * Claim rounds of the Redis Streams consumer against a real Redis: every `claimInterval`, however long a
 * blocking read (`block`) or a polling pause (`pollInterval`) may wait. The loop sends one command at a
 * time, so a read that blocks for `block` on an idle stream held the next `XAUTOCLAIM` back as long: a
 * retry decided with a 100 ms delay came back after the whole `block` (3 s), as did a crashed consumer's
 * entries. Now a read waits no longer than the next claim round.
 */
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/redis-streams/index.js';
import { env } from '../../helpers/env.js';
import { streamsFixture } from '../../helpers/streams-fixture.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('Redis Streams consumer: claim rounds', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups, add } = fixture;

  it.each([
    ['a blocking read', { block: '3s' }],
    ['a polling pause', { pollInterval: '3s' }],
  ] as const)('redelivers a retry after its delay, not after %s', async (kind, wait) => {
    // Arrange: reads that wait 3 s on an idle stream, claim rounds every 100 ms, a 100 ms retry delay.
    const stream = `ik-test:streams-claim-rounds:${run}:${kind.replace(/ /g, '-')}`;
    streams.push(stream, `${stream}:dlq`);
    const client = createClient({ url: env.redisUrl });
    await client.connect();
    cleanups.push(() => client.destroy());
    let blockingClient: ReturnType<typeof createClient> | undefined;
    if ('block' in wait) {
      blockingClient = createClient({ url: env.redisUrl });
      await blockingClient.connect();
      cleanups.push(() => blockingClient?.destroy());
    }
    const runs: number[] = [];
    const consumer = await idempotentConsumer(
      client,
      () => {
        runs.push(performance.now());
        if (runs.length === 1) throw new Error('transient');
      },
      {
        stream,
        group: 'workers',
        name: `claim-rounds-${run}`,
        idempotency: createIdempotency({ store: memoryStore() }),
        ...wait,
        ...(blockingClient === undefined ? {} : { blockingClient }),
        claimInterval: '100ms',
        minIdle: '300ms',
        backoff: () => 100,
        minRetryDelay: '100ms',
        maxRetryDelay: '100ms',
      },
    );
    cleanups.push(() => consumer.close());

    // Act
    await add(stream, `retried-${kind}`);
    await waitUntil('the redelivery', () => runs.length === 2, 10_000);

    // Assert: the delay (100 ms) plus a claim round or two (before: the whole 3 s wait).
    expect((runs[1] ?? 0) - (runs[0] ?? 0)).toBeLessThan(1500);
    expect(await consumer.close()).toBe(true);
  });
});
