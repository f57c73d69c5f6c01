/**
 * Retry and dead-letter copies whose publisher confirm never comes, against a real RabbitMQ: the
 * consumer's connection goes through a frame proxy that withholds every `basic.ack` (confirm) the broker
 * sends, the link otherwise working, so deliveries still arrive and acks still go out. Each such copy used
 * to hold its handler slot for good: with `concurrency: 2` (below the prefetch) and two hung copies, the
 * deliveries waiting for a slot never ran, and `close()` gave up after `drainTimeout`. Now each is waited
 * for at most `brokerTimeout` (default: `storeTimeout`, here the lease, 1 s), reported to `onBrokerError`,
 * and its slot freed; the original is never acked unless its copy is confirmed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../../../src/amqp/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { BASIC_ACK } from '../../helpers/amqp-frame-proxy.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';

describe('amqp consumer: copies whose confirm never comes', () => {
  const queues = new AmqpQueues();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(() => queues.close());

  /**
   * A consumer of a new queue through a proxy withholding confirms (or holding them back until the test
   * releases them), whose handler fails for keys starting
   * `fail-`; `maxDeliveries` 1 makes each failure a dead letter, else a retry (a minute away: its copy
   * stays in the retry queue for the test).
   */
  async function hungConsumer(
    name: string,
    maxDeliveries: number,
    confirms: 'withhold' | 'holdBack' = 'withhold',
  ) {
    const queue = await queues.queue(name);
    const { proxy, connection, channel } = await queues.proxiedChannel();
    const calls: string[] = [];
    const executed: Array<string | undefined> = [];
    const deadLetters: Array<string | undefined> = [];
    const brokerErrors: Array<{ key: string | undefined; operation: string; error: unknown }> = [];
    const consumer = await idempotentConsumer(
      channel,
      (_message, context) => {
        calls.push(context.key);
        if (context.key.startsWith('fail-')) throw new Error('boom');
      },
      {
        queue,
        name: queue,
        idempotency: createIdempotency({ store: memoryStore() }),
        lease: '1s',
        concurrency: 2,
        prefetch: 10,
        maxDeliveries,
        backoff: { initial: '1m', max: '1m', jitter: false },
        drainTimeout: '5s',
        hooks: {
          onExecuted: (event) => void executed.push(event.key),
          onDeadLetter: (event) => void deadLetters.push(event.key),
          onBrokerError: (event) => void brokerErrors.push(event),
        },
      },
    );
    if (confirms === 'withhold') proxy.withhold(BASIC_ACK);
    else proxy.holdBack(BASIC_ACK);
    return { queue, proxy, connection, consumer, calls, executed, deadLetters, brokerErrors };
  }

  it('frees the slots of retry copies whose confirm never comes, never acking their originals', async () => {
    // Arrange: two failing messages whose retry copies are never confirmed hold both slots.
    const run = await hungConsumer('hung-retry', 5);
    await queues.publish(run.queue, 'a', { messageId: 'fail-1' });
    await queues.publish(run.queue, 'b', { messageId: 'fail-2' });
    await waitUntil('both handlers to run', () => run.calls.length === 2);

    // Act
    for (const key of ['after-1', 'after-2', 'after-3']) {
      await queues.publish(run.queue, 'c', { messageId: key });
    }

    // Assert: before, the three waited for a slot for good.
    await waitUntil('the later messages to run', () => run.executed.length === 3);
    // The three may all run in the first slot freed, before the second copy is given up on.
    const isRetry = (event: { operation: string }) => event.operation === 'retry';
    await waitUntil('both copies given up on', () => run.brokerErrors.filter(isRetry).length === 2);
    expect(run.calls).toHaveLength(5);
    const retries = run.brokerErrors.filter(isRetry);
    expect(retries.map((event) => event.key).sort()).toEqual(['fail-1', 'fail-2']);
    expect(String((retries[0]?.error as Error | undefined)?.message)).toMatch(/within 1000 ms/);
    // Nothing in flight, but the two copies given up on still await their confirm: close() waits for
    // them up to drainTimeout, and says they did not settle.
    expect(await run.consumer.close()).toBe(false);
    // Never acked: the copies are in the retry queue (only their confirms were lost), and the originals
    // come back to the queue once the consumer's connection closes.
    await run.connection.close().catch(() => {});
    await waitUntil('the originals back', async () => (await queues.count(run.queue)) === 2);
    expect(await queues.count(`${run.queue}.retry`)).toBe(2);
  });

  it('frees the slots of dead letters whose confirm never comes, without another copy, never acking their originals', async () => {
    // Arrange
    const run = await hungConsumer('hung-dead-letter', 1);
    await queues.publish(run.queue, 'a', { messageId: 'fail-1' });
    await queues.publish(run.queue, 'b', { messageId: 'fail-2' });
    await waitUntil('both handlers to run', () => run.calls.length === 2);

    // Act
    for (const key of ['after-1', 'after-2']) {
      await queues.publish(run.queue, 'c', { messageId: key });
    }

    // Assert
    await waitUntil('the later messages to run', () => run.executed.length === 2);
    // Both may run in the first slot freed, before the second letter is given up on.
    const isFailed = (event: { key: string | undefined }) =>
      event.key?.startsWith('fail-') === true;
    await waitUntil(
      'both letters given up on',
      () => run.brokerErrors.filter(isFailed).length >= 2,
    );
    const given = run.brokerErrors.filter(isFailed);
    expect(given.map((event) => event.operation)).toEqual(['dead_letter', 'dead_letter']);
    expect(run.deadLetters).toEqual([]);
    // The two letters given up on still await their confirm: close() waits for them up to drainTimeout,
    // and says they did not settle.
    expect(await run.consumer.close()).toBe(false);
    await run.connection.close().catch(() => {});
    await waitUntil('the originals back', async () => (await queues.count(run.queue)) === 2);
    // The dead letters were written (only their confirms were lost), once each, and no retry copy
    // carrying them was published: the write may yet be confirmed, and a second path would write twice.
    expect(await queues.count(`${run.queue}.dlq`)).toBe(2);
    expect(await queues.count(`${run.queue}.retry`)).toBe(0);
  });

  it('acks the original of a dead letter given up on once its confirm comes late: one letter, acked once', async () => {
    // Arrange: confirms held back, then delivered late.
    const run = await hungConsumer('late-dead-letter', 1, 'holdBack');
    await queues.publish(run.queue, 'a', { messageId: 'fail-1' });
    await waitUntil('the dead letter to be given up', () => run.brokerErrors.length === 1);
    expect(run.brokerErrors[0]?.operation).toBe('dead_letter');

    // Act: the confirm comes, late.
    run.proxy.release();

    // Assert: the original is acked then (closing the connection gives nothing back), and the letter was
    // written once, with no retry copy.
    expect(await run.consumer.close()).toBe(true);
    await waitUntil('the letter', async () => (await queues.count(`${run.queue}.dlq`)) === 1);
    await new Promise((resolve) => setTimeout(resolve, 500));
    await run.connection.close().catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await queues.count(run.queue)).toBe(0);
    expect(await queues.count(`${run.queue}.dlq`)).toBe(1);
    expect(await queues.count(`${run.queue}.retry`)).toBe(0);
    expect(run.calls).toEqual(['fail-1']);
    // Reported once it landed (before: never, and nothing said the message was dead-lettered).
    expect(run.deadLetters).toEqual(['fail-1']);
  });
});
