/**
 * A dead letter the Redis Streams consumer cannot write (its DLQ key holds a string: `XADD` answers
 * WRONGTYPE): the entry stays pending for a later try, and that redelivery, past `maxDeliveries`, must
 * write the dead letter again without running the handler, however long the DLQ stays broken. Once it
 * works, the letter written is the one decided on, with the handler's error, and the entry is acked.
 */
import { randomUUID } from 'node:crypto';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer, type RedisStreamsClient } from '../../../src/redis-streams/index.js';
import { env, requireService } from '../../helpers/env.js';

type Client = ReturnType<typeof createClient>;

/** Poll until `predicate` holds, or fail after 10 s naming `what`. */
const waitUntil = (what: string, predicate: () => boolean) =>
  vi.waitFor(
    () => {
      if (!predicate()) throw new Error(`timed out waiting for ${what}`);
    },
    { timeout: 10_000, interval: 10 },
  );

describe('Redis Streams consumer: a dead-letter stream that fails', () => {
  const stream = `ik-test:streams-dlq-fails:${randomUUID().slice(0, 8)}`;
  const dlq = `${stream}:dlq`;
  let admin: Client;
  let client: Client;

  beforeAll(async () => {
    await requireService('Redis', env.redisUrl);
    admin = createClient({ url: env.redisUrl });
    client = createClient({ url: env.redisUrl });
    await Promise.all([admin.connect(), client.connect()]);
  });

  afterAll(async () => {
    client?.destroy();
    await admin?.sendCommand(['DEL', stream, dlq]);
    admin?.destroy();
  });

  it('never runs the handler past maxDeliveries, and writes the letter once the DLQ works', async () => {
    // Arrange: two deliveries allowed, short delays, a DLQ key of the wrong type.
    await admin.sendCommand(['SET', dlq, 'not a stream']);
    let runs = 0;
    const failedWrites: number[] = [];
    const deadLetters: number[] = [];
    const consumer = await idempotentConsumer(
      client as unknown as RedisStreamsClient,
      () => {
        runs++;
        throw new Error(`payment gateway down (run ${runs})`);
      },
      {
        stream,
        group: 'workers',
        name: stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        maxDeliveries: 2,
        backoff: () => 50,
        minRetryDelay: '50ms',
        maxRetryDelay: '100ms',
        minIdle: '200ms',
        claimInterval: '50ms',
        pollInterval: '20ms',
        hooks: {
          onBrokerError: (event) => {
            if (event.operation === 'dead_letter') failedWrites.push(event.deliveryCount);
          },
          onDeadLetter: (event) => deadLetters.push(event.deliveryCount),
        },
      },
    );
    // Act: the DLQ fails on delivery 2 and on three redeliveries past it; then it is repaired.
    const id = (await admin.sendCommand([
      'XADD',
      stream,
      '*',
      'x-idempotency-key',
      'p1',
    ])) as string;
    await waitUntil('three redeliveries past the limit', () => failedWrites.length >= 4);
    const runsWhileBroken = runs;
    await admin.sendCommand(['DEL', dlq]);
    await waitUntil('the dead letter', () => deadLetters.length === 1);
    await consumer.close();
    // Assert
    expect(runsWhileBroken).toBe(2);
    expect(runs).toBe(2);
    expect(Math.max(...failedWrites)).toBeGreaterThan(2);
    const letters = (await admin.sendCommand(['XRANGE', dlq, '-', '+'])) as Array<
      [string, string[]]
    >;
    expect(letters).toHaveLength(1);
    const fields = letters[0]?.[1] ?? [];
    const field = (name: string) => fields[fields.indexOf(name) + 1];
    expect(field('x-idempotency-key')).toBe('p1');
    expect(field('x-idempotency-entry-id')).toBe(id);
    expect(field('x-idempotency-deliveries')).toBe('2');
    expect(JSON.parse(field('x-idempotency-error') ?? '{}').message).toBe(
      'payment gateway down (run 2)',
    );
    const pending = (await admin.sendCommand(['XPENDING', stream, 'workers'])) as [number];
    expect(Number(pending[0])).toBe(0);
  });
});
