/**
 * A consumer whose `ack_wait` is months long: the handlers' `working()` interval, a third of it, is past a
 * timer's limit (2^31-1 ms, about 24.8 days), which Node fires at once. It must not send `working()` in a
 * loop, against a real JetStream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/nats/index.js';
import { type NatsFixture, natsFixture, until } from './setup.js';

describe('NATS consumer: an ack_wait past a timer’s limit', () => {
  let f: NatsFixture;

  beforeAll(async () => {
    f = await natsFixture('timer-limits', 365 * 86_400_000);
  });

  afterAll(async () => {
    await f?.destroy();
  });

  it('sends no working() during a half-second handler when ack_wait is 365 days', async () => {
    // Arrange: every ack of the consumer, as the server receives it (working() is `+WPI`).
    const progress: string[] = [];
    const acks = f.nc.subscribe(`$JS.ACK.${f.stream}.>`, {
      callback: (_error, message) => {
        const body = message.string();
        if (body.startsWith('+WPI')) progress.push(body);
      },
    });
    await f.nc.flush();
    let executed = 0;
    const running = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      async () => {
        await new Promise((resolve) => setTimeout(resolve, 500));
      },
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        hooks: { onExecuted: () => void executed++ },
      },
    );
    // Act
    await f.publish('long-ack-wait');
    await until('the message executed', () => executed === 1, 10_000);
    await running.close();
    await f.nc.flush();
    acks.unsubscribe();
    // Assert
    expect(progress).toEqual([]);
  });
});
