/**
 * A JetStream message whose own headers nearly fill the 64 KiB JetStream stores with a message is still
 * dead-lettered: its copy leaves its largest headers out, naming them, rather than being refused whole at
 * every try, the message redelivered after each `maxRetryDelay` to write its letter again, forever.
 */
import { headers } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/nats/index.js';
import { type NatsFixture, natsFixture, until } from './setup.js';

describe('NATS consumer: a message with headers near 64 KiB', () => {
  const fixtures: NatsFixture[] = [];
  afterAll(async () => {
    for (const f of fixtures) await f.destroy();
  });

  it('is dead-lettered once, its largest header left out and named, and terminated', async () => {
    // Arrange
    const f = await natsFixture('huge-headers');
    fixtures.push(f);
    let runs = 0;
    const failedWrites: unknown[] = [];
    const deadLetters: string[] = [];
    const running = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      () => {
        runs++;
        throw new Error('card declined');
      },
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        maxDeliveries: 1,
        minRetryDelay: '50ms',
        maxRetryDelay: '100ms',
        publisher: f.js,
        deadLetterSubject: f.dlq,
        hooks: {
          onBrokerError: (event) => failedWrites.push(event.error),
          onDeadLetter: (event) => deadLetters.push(event.reason),
        },
      },
    );
    // Act: 65,236 bytes of headers, which JetStream stores (it refuses past 65,535).
    const sent = headers();
    sent.set('Nats-Msg-Id', 'pay-1');
    sent.set('trace', 't'.repeat(65_536 - 300));
    await f.js.publish(f.subject, new TextEncoder().encode('payload'), { headers: sent });
    await until('the dead letter', () => deadLetters.length + failedWrites.length > 0);
    // A redelivery (the letter's write failing) would come within maxRetryDelay.
    await new Promise((resolve) => setTimeout(resolve, 500));
    // Assert
    expect(await running.close()).toBe(true);
    expect(failedWrites).toEqual([]);
    expect(deadLetters).toEqual(['handler_error']);
    expect(runs).toBe(1);
    const letters = await f.deadLetters();
    expect(letters).toHaveLength(1);
    expect(new TextDecoder().decode(letters[0]?.data)).toBe('payload');
    expect(letters[0]?.header.get('x-idempotency-omitted-headers')).toBe('trace');
    expect(letters[0]?.header.has('trace')).toBe(false);
    expect(letters[0]?.header.get('x-idempotency-dead-letter-reason')).toBe('handler_error');
    const info = await f.jsm.consumers.info(f.stream, f.durable);
    expect(info.num_ack_pending + info.num_pending).toBe(0);
  });
});
