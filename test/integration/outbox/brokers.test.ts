import { randomBytes } from 'node:crypto';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import {
  headers,
  type NatsConnection,
  nanos,
  connect as natsConnect,
} from '@nats-io/transport-node';
import amqp from 'amqplib';
import { Redis as IoRedis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  amqpPublisher,
  createRelay,
  decodePayload,
  enqueue,
  natsPublisher,
  type OutboxMessage,
  postgresOutboxSource,
  redisStreamsPublisher,
} from '../../../src/outbox/index.js';
import { env, requireService } from '../../helpers/env.js';
import { type OutboxDatabase, openOutboxDatabase } from '../../helpers/outbox-postgres.js';

const run = randomBytes(4).toString('hex');

function message(overrides: Partial<OutboxMessage> = {}): OutboxMessage {
  return {
    id: `msg-${run}-${randomBytes(4).toString('hex')}`,
    topic: 'payment.initiated',
    key: 'p-42',
    payload: Buffer.from(JSON.stringify({ amount: 42 })),
    contentType: 'application/json',
    headers: { 'x-trace': 'abc' },
    rowId: '1',
    attempt: 1,
    createdAt: Date.now(),
    ...overrides,
  };
}

describe('amqpPublisher (RabbitMQ confirm channel)', () => {
  let connection: amqp.ChannelModel;
  let channel: amqp.ConfirmChannel;
  const queue = `outbox-test-${run}`;

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    connection = await amqp.connect(env.amqpUrl);
    channel = await connection.createConfirmChannel();
    await channel.assertQueue(queue, { durable: false, autoDelete: false });
  });

  afterAll(async () => {
    await channel?.deleteQueue(queue).catch(() => {});
    await connection?.close().catch(() => {});
  });

  it('delivers the message with the stable id as messageId, its content type, key and headers', async () => {
    const publisher = amqpPublisher({ channel, routingKey: () => queue });
    const sent = message();

    await publisher.publish(sent);

    let got: amqp.GetMessage | false = false;
    for (let i = 0; i < 50 && got === false; i++) {
      got = await channel.get(queue, { noAck: true });
      if (got === false) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(got).not.toBe(false);
    const received = got as amqp.GetMessage;
    expect(received.properties.messageId).toBe(sent.id);
    expect(received.properties.contentType).toBe('application/json');
    expect(received.properties.type).toBe('payment.initiated');
    expect(received.properties.headers).toMatchObject({ 'x-trace': 'abc', 'x-outbox-key': 'p-42' });
    expect(JSON.parse(received.content.toString())).toEqual({ amount: 42 });
  });

  it('rejects a publish the broker cannot route, so the row stays unsent', async () => {
    const publisher = amqpPublisher({ channel, routingKey: () => `no-such-queue-${run}` });
    await expect(publisher.publish(message())).rejects.toThrow(/unroutable/);
    // The channel is still usable afterwards.
    await expect(
      amqpPublisher({ channel, routingKey: () => queue }).publish(message()),
    ).resolves.toBeUndefined();
    await channel.purgeQueue(queue);
  });

  it('recovers through a channel function once RabbitMQ closed the channel it had', async () => {
    // Arrange: a publish to an exchange that does not exist makes RabbitMQ close the channel (404); amqplib
    // never reopens it. The application's function hands over a new one when the old one closed.
    let current = await connection.createConfirmChannel();
    let closed = false;
    const watch = (c: amqp.ConfirmChannel) => {
      c.on('error', () => {});
      c.on('close', () => {
        closed = true;
      });
    };
    watch(current);
    const channelNow = async () => {
      if (closed) {
        closed = false;
        current = await connection.createConfirmChannel();
        watch(current);
      }
      return current;
    };
    const broken = amqpPublisher({ channel: current, exchange: `no-such-exchange-${run}` });
    await expect(broken.publish(message())).rejects.toThrow();
    // A publisher bound to that channel fails for good, though the queue is there.
    const bound = amqpPublisher({ channel: current, routingKey: () => queue });
    await expect(bound.publish(message())).rejects.toThrow();
    // Act: one bound to the function gets the reopened channel.
    const recovering = amqpPublisher({ channel: channelNow, routingKey: () => queue });
    const sent = message();
    await recovering.publish(sent);
    // Assert: delivered; and unroutable copies are still refused on the new channel.
    const got = await channel.get(queue, { noAck: true });
    expect(got !== false && got.properties.messageId).toBe(sent.id);
    await expect(
      amqpPublisher({ channel: channelNow, routingKey: () => `no-such-queue-${run}` }).publish(
        message(),
      ),
    ).rejects.toThrow(/unroutable/);
    await current.close().catch(() => {});
  });

  it('rejects, without publishing, when the channel function gives something else', async () => {
    const publisher = amqpPublisher({
      channel: () => ({}) as unknown as amqp.ConfirmChannel,
      routingKey: () => queue,
    });
    await expect(publisher.publish(message())).rejects.toThrow(
      /must return an amqplib confirm channel/,
    );
    expect(() => amqpPublisher({ channel: {} as unknown as amqp.ConfirmChannel })).toThrow(
      /confirm channel, or a function returning one/,
    );
  });

  it('refuses a plain channel, given or returned, so that no unconfirmed copy reaches the queue', async () => {
    // Arrange: createChannel() instead of createConfirmChannel(), an easy slip. Its publish delivers the
    // message and never calls the callback: before, every attempt timed out in the relay and put another
    // copy on the queue, forever, and the row was never marked sent.
    const plain = await connection.createChannel();
    const target = `outbox-plain-${run}`;
    await plain.assertQueue(target, { durable: false });
    const plainChannel = plain as unknown as amqp.ConfirmChannel;
    try {
      // Act / Assert: refused when given; a function returning it rejects every publish, sending nothing.
      expect(() => amqpPublisher({ channel: plainChannel, routingKey: () => target })).toThrow(
        expect.objectContaining({
          code: 'invalid_options',
          message: expect.stringMatching(/plain channel \(createChannel\(\)\) never confirms/),
        }),
      );
      const viaFunction = amqpPublisher({ channel: () => plainChannel, routingKey: () => target });
      await expect(viaFunction.publish(message())).rejects.toThrow(
        /must return an amqplib confirm channel; a plain channel/,
      );
      expect((await plain.checkQueue(target)).messageCount).toBe(0);
    } finally {
      await plain.deleteQueue(target).catch(() => {});
      await plain.close().catch(() => {});
    }
  });
});

describe('natsPublisher (JetStream)', () => {
  let nc: NatsConnection;
  const stream = `OUTBOX_${run}`;
  const subject = `outbox.${run}.payments`;

  beforeAll(async () => {
    await requireService('NATS', env.natsUrl);
    nc = await natsConnect({ servers: env.natsUrl });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: stream, subjects: [subject], duplicate_window: nanos(120_000) });
  });

  afterAll(async () => {
    if (nc === undefined) return;
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(stream).catch(() => {});
    await nc.close();
  });

  it('publishes with Nats-Msg-Id = the stable id, and the stream rejects a re-send as a duplicate', async () => {
    const duplicates: string[] = [];
    const publisher = natsPublisher({
      js: jetstream(nc),
      headers,
      subject: () => subject,
      onDuplicate: (m) => duplicates.push(m.id),
    });
    const sent = message();

    await publisher.publish(sent);
    await publisher.publish({ ...sent, attempt: 2 }); // the relay re-sending after a crash

    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info(stream);
    expect(info.state.messages).toBe(1);
    expect(duplicates).toEqual([sent.id]);
    const stored = await jsm.streams.getMessage(stream, { seq: info.state.first_seq });
    expect(stored?.header.get('Nats-Msg-Id')).toBe(sent.id);
    expect(stored?.header.get('Content-Type')).toBe('application/json');
    expect(stored?.header.get('Outbox-Key')).toBe('p-42');
    expect(stored?.header.get('x-trace')).toBe('abc');
    expect(stored?.json()).toEqual({ amount: 42 });
  });

  it('loads the headers factory itself when none is passed', async () => {
    const publisher = natsPublisher({ js: jetstream(nc), subject: () => subject });
    await expect(publisher.publish(message())).resolves.toBeUndefined();
  });

  it('refuses the connection in place of jetstream(nc), so that no copy without Nats-Msg-Id is stored', async () => {
    // Arrange: `js: nc`, an easy slip. Before, it was taken: each attempt stored a copy in the stream
    // (no Nats-Msg-Id, so never deduplicated), then failed reading the PubAck the connection never gives,
    // and the relay retried the row forever.
    const jsm = await jetstreamManager(nc);
    const before = (await jsm.streams.info(stream)).state.messages;

    // Act / Assert
    expect(() => natsPublisher({ js: nc as never, headers, subject: () => subject })).toThrow(
      expect.objectContaining({
        code: 'invalid_options',
        message: expect.stringMatching(
          /is a NATS connection, not a JetStream client: pass jetstream\(nc\)/,
        ),
      }),
    );
    await nc.flush();
    expect((await jsm.streams.info(stream)).state.messages).toBe(before);
  });
});

describe('redisStreamsPublisher', () => {
  const stream = `outbox-test-${run}`;
  let client: ReturnType<typeof createClient>;
  let io: IoRedis;

  beforeAll(async () => {
    await requireService('Redis', env.redisUrl);
    client = createClient({ url: env.redisUrl });
    await client.connect();
    io = new IoRedis(env.redisUrl);
  });

  afterAll(async () => {
    await client?.del(stream).catch(() => {});
    await client?.quit().catch(() => {});
    io?.disconnect();
  });

  it('appends an entry with the stable id in the x-idempotency-key field, which the consumer reads (node-redis and ioredis)', async () => {
    const first = message();
    const second = message({
      key: null,
      payload: Buffer.from('plain'),
      contentType: 'text/plain; charset=utf-8',
    });

    await redisStreamsPublisher({ client, stream: () => stream }).publish(first);
    await redisStreamsPublisher({ client: io, stream: () => stream, maxLen: 1000 }).publish(second);

    const entries = (await client.xRange(stream, '-', '+')) ?? [];
    expect(entries.map((e) => e.message['x-idempotency-key'])).toEqual([first.id, second.id]);
    const [a, b] = entries as [(typeof entries)[0], (typeof entries)[0]];
    expect(a.message).toMatchObject({
      topic: 'payment.initiated',
      key: 'p-42',
      'content-type': 'application/json',
    });
    expect(JSON.parse(a.message.headers!)).toEqual({ 'x-trace': 'abc' });
    expect(JSON.parse(a.message.payload!)).toEqual({ amount: 42 });
    expect(b.message.key).toBeUndefined();
    expect(
      decodePayload({
        payload: Buffer.from(b.message.payload!),
        contentType: b.message['content-type']!,
      }),
    ).toBe('plain');
  });
});

describe('relay from PostgreSQL to the brokers (separate-process topology)', () => {
  let db: OutboxDatabase;
  let nc: NatsConnection;
  let connection: amqp.ChannelModel;
  const stream = `OUTBOX_E2E_${run}`;
  const subject = `outbox.${run}.e2e`;
  const queue = `outbox-e2e-${run}`;

  beforeAll(async () => {
    await requireService('NATS', env.natsUrl);
    await requireService('RabbitMQ', env.amqpUrl);
    db = await openOutboxDatabase(4);
    nc = await natsConnect({ servers: env.natsUrl });
    await (await jetstreamManager(nc)).streams.add({ name: stream, subjects: [subject] });
    connection = await amqp.connect(env.amqpUrl);
  });

  afterAll(async () => {
    await (await jetstreamManager(nc)).streams.delete(stream).catch(() => {});
    await nc?.close();
    await connection?.close().catch(() => {});
    await db?.close();
  });

  it('RabbitMQ: the consumer receives the enqueued message with messageId = enqueue’s messageId', async () => {
    const channel = await connection.createConfirmChannel();
    await channel.assertQueue(queue, { autoDelete: true });
    const received: amqp.ConsumeMessage[] = [];
    await channel.consume(queue, (m) => m && received.push(m), { noAck: true });
    const relay = createRelay({
      source: postgresOutboxSource({ pool: db.pool, schema: db.schema, listen: false }),
      publisher: amqpPublisher({ channel, routingKey: () => queue }),
    });
    const { messageId } = await db.transaction((tx) =>
      enqueue(tx, { topic: 'payment.initiated', payload: { id: 'p-1' } }, { schema: db.schema }),
    );

    await relay.drain();

    for (let i = 0; i < 100 && received.length === 0; i++)
      await new Promise((r) => setTimeout(r, 20));
    expect(received.map((m) => m.properties.messageId)).toEqual([messageId]);
    await channel.close();
  });

  it('NATS: a relay that dies between the confirm and the mark re-publishes after the lease, and JetStream drops the duplicate', async () => {
    const js = jetstream(nc);
    const duplicates: string[] = [];
    const publisher = natsPublisher({
      js,
      headers,
      subject: () => subject,
      onDuplicate: (m) => duplicates.push(m.id),
    });
    const real = postgresOutboxSource({ pool: db.pool, schema: db.schema, listen: false });
    // The first relay "crashes" right after the broker confirmed: its mark never reaches the database.
    const crashing = createRelay({
      source: { ...real, markSent: () => Promise.reject(new Error('killed before mark-sent')) },
      publisher,
      leaseMs: 500,
      publishTimeoutMs: 200,
    });
    const survivor = createRelay({ source: real, publisher });
    const { messageId } = await db.transaction((tx) =>
      enqueue(tx, { topic: 'payment.initiated', payload: { id: 'p-2' } }, { schema: db.schema }),
    );

    await expect(crashing.runOnce()).rejects.toThrow('killed before mark-sent');
    await new Promise((r) => setTimeout(r, 700)); // the lease runs out
    await survivor.drain();

    expect(duplicates).toEqual([messageId]);
    const info = await (await jetstreamManager(nc)).streams.info(stream);
    expect(info.state.messages).toBe(1);
    expect((await db.rows()).find((row) => row.message_id === messageId)).toMatchObject({
      attempts: 2,
      sent_at: expect.any(Date),
    });
  });
});
