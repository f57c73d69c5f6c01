/**
 * The RabbitMQ consumer with its connection blackholed through a TCP proxy while handlers run: completions
 * are made, acks and retry copies go into the void, then the link dies. What must hold (the promises of
 * docs/consumers/amqp.md and overview.md, not tested with a cut link before): no message is lost, a
 * completed one runs once, a failed one is retried, never acked without a confirmed copy.
 */
import type amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AmqpConsumerOptions,
  type AmqpMessage,
  idempotentConsumer,
} from '../../../src/amqp/index.js';
import { memoryStore } from '../../../src/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { proxiedAmqpChannels } from '../../helpers/amqp-proxied.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';
import { connectClient } from '../../helpers/redis-clients.js';
import { startRedisProxy } from '../../helpers/tcp-proxy.js';

const MESSAGES = 10;

describe('amqp consumer: its connection blackholed while handlers run', () => {
  const queues = new AmqpQueues();
  const channels = proxiedAmqpChannels();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(async () => {
    await channels.close();
    await queues.close();
  });

  /** A confirm channel on a connection through a new proxy. */
  const proxiedChannel = () => channels.open();

  /**
   * Run MESSAGES messages through a consumer whose link is cut once every handler started; the handlers end
   * (or throw, the first time, with `failFirst`) during the cut. Then the link is restored (the broker
   * requeues what was not acked) and a second consumer, on a direct connection and the same store, goes on.
   */
  async function cutWhileRunning(name: string, failFirst: boolean) {
    const queue = await queues.queue(name);
    const store = memoryStore();
    const runs = new Map<string, number>();
    const succeeded = new Set<string>();
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const brokerErrors: string[] = [];
    const handler = async (message: AmqpMessage) => {
      const key = String(message.properties.messageId);
      const run = (runs.get(key) ?? 0) + 1;
      runs.set(key, run);
      await released;
      if (failFirst && run === 1) throw new Error('declined, try again');
      succeeded.add(key);
    };
    const options: AmqpConsumerOptions = {
      queue,
      name: queue,
      idempotency: { store },
      prefetch: MESSAGES,
      minRetryDelay: '50ms',
      maxRetryDelay: '100ms',
      hooks: { onBrokerError: (event) => brokerErrors.push(event.operation) },
    };
    const { proxy, channel } = await proxiedChannel();
    const first = await idempotentConsumer(channel, handler, options);
    for (let i = 0; i < MESSAGES; i++) {
      await queues.publish(queue, `payment ${i}`, { messageId: `${name}-${i}` });
    }
    await waitUntil('every handler to start', () => runs.size === MESSAGES);

    proxy.cut();
    release();
    // Completions (or releases) are made; acks or retry copies are written into the cut link.
    await new Promise((resolve) => setTimeout(resolve, 300));
    proxy.restore();
    await first.done;
    const second = await queues.start(handler, options);
    await waitUntil('every message to succeed', () => succeeded.size === MESSAGES, 10_000);
    await waitUntil('the queues to empty', async () => {
      const counts = await Promise.all(
        [queue, `${queue}.retry`, `${queue}.dlq`].map((q) => queues.count(q)),
      );
      return counts.every((count) => count === 0);
    });
    // Nothing more runs once the redeliveries settled.
    await new Promise((resolve) => setTimeout(resolve, 200));
    await second.close();
    return { runs, brokerErrors };
  }

  it('acks written into a cut link: the requeued messages are duplicates, acked without running again', async () => {
    const { runs } = await cutWhileRunning('cut-acks', false);

    expect([...runs.values()]).toEqual(Array(MESSAGES).fill(1));
  });

  it('retry copies written into a cut link: never confirmed, so the originals are not acked, come back and run once more', async () => {
    const { runs, brokerErrors } = await cutWhileRunning('cut-retries', true);

    // One failed run and one that succeeded per message: none lost, none dead-lettered, none run twice after
    // succeeding.
    expect([...runs.values()]).toEqual(Array(MESSAGES).fill(2));
    expect(brokerErrors.length).toBeGreaterThan(0);
    expect(new Set(brokerErrors)).toEqual(new Set(['retry']));
  });
});

describe('amqp consumer: the broker closes its channel while handlers run', () => {
  const queues = new AmqpQueues();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(() => queues.close());

  it('an ack of an unknown delivery tag on the channel (PRECONDITION_FAILED): every message runs once, none lost', async () => {
    // Arrange (holds; not tested before with handlers in flight)
    const queue = await queues.queue('channel-error');
    const store = memoryStore();
    const runs = new Map<string, number>();
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const handler = async (message: AmqpMessage) => {
      const key = String(message.properties.messageId);
      runs.set(key, (runs.get(key) ?? 0) + 1);
      await released;
    };
    const brokerErrors: string[] = [];
    const options: AmqpConsumerOptions = {
      queue,
      name: queue,
      idempotency: { store },
      prefetch: 5,
      hooks: { onBrokerError: (event) => brokerErrors.push(event.operation) },
    };
    const { channel } = await queues.consumerChannel();
    const first = await idempotentConsumer(channel, handler, options);
    for (let i = 0; i < 5; i++)
      await queues.publish(queue, `payment ${i}`, { messageId: `ce-${i}` });
    await waitUntil('every handler to start', () => runs.size === 5);

    // Act: a stray ack on the consumer's channel makes RabbitMQ close it, unacked messages requeued.
    channel.ack({ fields: { deliveryTag: 999_999 } } as unknown as amqp.Message);
    await first.done;
    release();
    await waitUntil('the acks on the closed channel to fail', () => brokerErrors.length === 5);
    const second = await queues.start(handler, options);
    await waitUntil('the queue to empty', async () => (await queues.count(queue)) === 0);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await second.close();

    // Assert: the completions were made, so the redeliveries are duplicates, acked without running.
    expect([...runs.values()]).toEqual([1, 1, 1, 1, 1]);
    expect(new Set(brokerErrors)).toEqual(new Set(['ack']));
  });
});

describe('amqp consumer: close() while the store is blackholed after the handler ran', () => {
  const queues = new AmqpQueues();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await requireService('Redis', env.redisUrl);
    await queues.open();
  });
  afterAll(() => queues.close());

  it('resolves false at drainTimeout, acks nothing meanwhile, and the message runs once in all', async () => {
    // Arrange (a promise of docs/consumers/amqp.md and overview.md, not tested with a cut store before)
    const queue = await queues.queue('close-in-outage');
    const proxy = await startRedisProxy(env.redisUrl);
    const through = await connectClient('node-redis', proxy.url, { offlineQueue: false });
    const direct = await connectClient('node-redis', env.redisUrl);
    const prefix = `ik-chaos:${queue}:`;
    const store = (client: typeof direct.client) =>
      redisStore({ client, prefix, timeoutMs: 200, checkEvictionPolicy: false });
    let runs = 0;
    const handler = async () => {
      runs++;
      // The effect is done; the store goes away before the completion.
      proxy.cut();
    };
    const options: AmqpConsumerOptions = {
      queue,
      name: queue,
      idempotency: { store: store(through.client), leaseMs: 3000 },
      drainTimeout: '500ms',
      minRetryDelay: '50ms',
      maxRetryDelay: '200ms',
    };
    const first = await queues.start(handler, options);
    await queues.publish(queue, 'payment', { messageId: 'close-in-outage-1' });
    await waitUntil('the handler to run', () => runs === 1);

    // Act
    const startedAt = Date.now();
    const drained = await first.close();
    const closeMs = Date.now() - startedAt;
    // What a service does after close(): end its connection; the unacked message goes back to the queue.
    await first.connection.close();
    // Not acked without its completion: the broker requeued it.
    await waitUntil('the message to be requeued', async () => (await queues.count(queue)) === 1);
    proxy.restore();
    const second = await queues.start(handler, {
      ...options,
      idempotency: { store: store(direct.client), leaseMs: 3000 },
    });
    await waitUntil('the queues to empty', async () => {
      const counts = await Promise.all(
        [queue, `${queue}.retry`, `${queue}.dlq`].map((q) => queues.count(q)),
      );
      return counts.every((count) => count === 0);
    });
    await second.close();
    await through.close();
    await direct.close();
    await proxy.close();

    // Assert: the completion could not be made in time, so close() says so, within its timeout; the
    // redelivery found the record completed (the retried completion got through once the link healed) or
    // the lease over, and ran nothing.
    expect(drained).toBe(false);
    expect(closeMs).toBeLessThan(1500);
    expect(runs).toBe(1);
  });
});
