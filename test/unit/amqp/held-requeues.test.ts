import { afterEach, describe, expect, it, vi } from 'vitest';
import { AckBatcher } from '../../../src/amqp/acks.js';
import { AmqpDelivery, AmqpSettler } from '../../../src/amqp/delivery.js';
import { HELD_LOCALLY_MS, HeldRequeues } from '../../../src/amqp/held-requeues.js';
import {
  type AmqpConfirmChannel,
  type AmqpMessage,
  idempotentConsumer,
} from '../../../src/amqp/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { fakeChannel as consumerChannel } from './fake-channel.js';

/** A channel that records acks and nacks in the order they are written. */
function fakeChannel() {
  const frames: string[] = [];
  const channel = {
    ack(message: AmqpMessage, allUpTo = false) {
      frames.push(`ack ${message.fields.deliveryTag}${allUpTo ? ' multiple' : ''}`);
    },
    nack(message: AmqpMessage, allUpTo = false, requeue = true) {
      frames.push(
        `nack ${message.fields.deliveryTag}${allUpTo ? ' multiple' : ''}${requeue ? ' requeue' : ''}`,
      );
    },
  } as unknown as AmqpConfirmChannel;
  return { channel, frames };
}

const message = (tag: number): AmqpMessage => ({
  content: Buffer.from(''),
  fields: { deliveryTag: tag, redelivered: false, exchange: '', routingKey: 'q' },
  properties: {},
});

describe('HeldRequeues', () => {
  it('lets the acks after a requeued message go as one multiple ack again', async () => {
    // Arrange: four deliveries; the first is held (no retry copy of it can be made), then handed back.
    const { channel, frames } = fakeChannel();
    const acks = new AckBatcher(channel);
    const messages = [1, 2, 3, 4].map(message);
    for (const m of messages) acks.delivered(m);
    const held = new HeldRequeues(channel, acks);
    held.requeueAfter(messages[0]!, 60_000, performance.now());
    // Act
    held.requeueAll();
    await Promise.all(messages.slice(1).map((m) => acks.ack(m)));
    // Assert: before, tag 1 stayed the batcher's floor for good, and every later ack went on its own.
    expect(frames).toEqual(['nack 1 requeue', 'ack 4 multiple']);
  });

  it('keeps a held message out of a multiple ack until it is handed back', async () => {
    // Arrange
    const { channel, frames } = fakeChannel();
    const acks = new AckBatcher(channel);
    const messages = [1, 2, 3].map(message);
    for (const m of messages) acks.delivered(m);
    const held = new HeldRequeues(channel, acks);
    held.requeueAfter(messages[0]!, 60_000, performance.now());
    // Act
    await Promise.all(messages.slice(1).map((m) => acks.ack(m)));
    held.requeueAll();
    // Assert
    expect(frames).toEqual(['ack 2', 'ack 3', 'nack 1 requeue']);
  });
});

describe('HeldRequeues: processed again in this process', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('processes a held message again after its delay, never handing it back to the queue', () => {
    // Arrange
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const { channel, frames } = fakeChannel();
    const acks = new AckBatcher(channel);
    const m = message(1);
    acks.delivered(m);
    const reruns: number[] = [];
    const held = new HeldRequeues(channel, acks, (again, runs) => {
      expect(again).toBe(m);
      reruns.push(runs);
    });
    const deliveredAt = performance.now();
    // Act: held three times, 1 s each.
    for (let i = 0; i < 3; i++) {
      held.requeueAfter(m, 1000, deliveredAt);
      vi.advanceTimersByTime(1000);
    }
    // Assert: each requeue was one more delivery toward a quorum queue's delivery-limit.
    expect(reruns).toEqual([1, 2, 3]);
    expect(frames).toEqual([]);
  });

  it(`hands it back to the queue once held ${HELD_LOCALLY_MS / 60_000} minutes (the broker's consumer_timeout)`, () => {
    // Arrange
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const { channel, frames } = fakeChannel();
    const acks = new AckBatcher(channel);
    const m = message(1);
    acks.delivered(m);
    let reruns = 0;
    const held = new HeldRequeues(channel, acks, () => {
      reruns += 1;
    });
    const deliveredAt = performance.now();
    // Act: 30 s delays, until one would end past the limit.
    while (frames.length === 0 && reruns < 100) {
      held.requeueAfter(m, 30_000, deliveredAt);
      vi.advanceTimersByTime(30_000);
    }
    // Assert
    expect(reruns).toBe(HELD_LOCALLY_MS / 30_000);
    expect(frames).toEqual(['nack 1 requeue']);
  });

  it('forgets its held messages when the channel closed: neither processed again nor handed back', () => {
    // Arrange
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const { channel, frames } = fakeChannel();
    const acks = new AckBatcher(channel);
    let reruns = 0;
    const held = new HeldRequeues(channel, acks, () => {
      reruns += 1;
    });
    held.requeueAfter(message(1), 1000, performance.now());
    // Act
    held.dropAll();
    vi.advanceTimersByTime(5000);
    // Assert
    expect(reruns).toBe(0);
    expect(frames).toEqual([]);
  });
});

// A message whose own headers leave no room for a retry copy's (header-room.ts).
const huge = (tag: number): AmqpMessage => ({
  content: Buffer.from('pay'),
  fields: { deliveryTag: tag, redelivered: false, exchange: '', routingKey: 'q' },
  properties: { messageId: 'pay-1', headers: { trace: 't'.repeat(65_400) } },
});

describe('HeldRequeues: counted from the delivery, as RabbitMQ counts consumer_timeout', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  const minutes = (n: number) => n * 60_000;

  it('hands back a message whose first run took 9.5 minutes at the end of its 1-minute hold', async () => {
    // Arrange
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const { channel, frames } = fakeChannel();
    const acks = new AckBatcher(channel);
    const reruns: number[] = [];
    const settler = new AmqpSettler(channel, acks, 'q.retry', 'q.dlq', (_again, runs) => {
      reruns.push(runs);
    });
    const m = huge(1);
    acks.delivered(m);
    const delivery = new AmqpDelivery(settler, m);
    // Act: the handler ran 9.5 minutes, then met its key in progress elsewhere.
    vi.advanceTimersByTime(minutes(9.5));
    await delivery.retry(minutes(1));
    vi.advanceTimersByTime(minutes(1));
    // Assert: before, counted from this hold, it ran again at minute 10.5, and could run again until
    // minute 19.5: a handler run of over 10.5 minutes then passed the 30-minute consumer_timeout.
    expect(reruns).toEqual([]);
    expect(frames).toEqual(['nack 1 requeue']);
  });

  it(`runs a held message again only while its delay ends within ${HELD_LOCALLY_MS / 60_000} minutes of its delivery`, async () => {
    // Arrange: each run takes 3 minutes and is held 30 s.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const { channel, frames } = fakeChannel();
    const acks = new AckBatcher(channel);
    const deliveredAt = performance.now();
    const rerunAt: number[] = [];
    let current: AmqpDelivery;
    const settler = new AmqpSettler(channel, acks, 'q.retry', 'q.dlq', (again, runs) => {
      rerunAt.push(performance.now() - deliveredAt);
      current = new AmqpDelivery(settler, again, runs);
    });
    const m = huge(1);
    acks.delivered(m);
    current = new AmqpDelivery(settler, m);
    // Act
    while (frames.length === 0 && rerunAt.length < 100) {
      vi.advanceTimersByTime(minutes(3));
      await current.retry(30_000);
      vi.advanceTimersByTime(30_000);
    }
    // Assert: the third hold would end at minute 10.5. Before, counted from the first hold (minute 3),
    // it ran again at minute 10.5 too, and was handed back at minute 14.
    expect(rerunAt).toEqual([minutes(3.5), minutes(7)]);
    expect(frames).toEqual(['nack 1 requeue']);
  });
});

describe('amqp consumer: close() with a held message', () => {
  it('hands it back once the broker took the cancel in, not before', async () => {
    // Arrange: the first delivery runs; the second finds it in progress and is held for its delay.
    const { channel, control, nacked } = consumerChannel();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let retries = 0;
    const consumer = await idempotentConsumer(channel, () => gate, {
      queue: 'q',
      name: 'held-at-close',
      idempotency: createIdempotency({ store: memoryStore() }),
      drainTimeout: '2s',
      hooks: {
        onRetry: () => {
          retries += 1;
        },
      },
    });
    control.deliver(huge(1));
    control.deliver(huge(2));
    while (retries === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    // Act
    const closing = consumer.close();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const beforeCancel = [...nacked];
    control.answerCancel();
    release();
    await closing;
    // Assert: before, it was requeued while the consumer still consumed, and came straight back to it.
    expect(beforeCancel).toEqual([]);
    expect(nacked).toEqual([{ tag: 2, requeue: true }]);
  });
});
