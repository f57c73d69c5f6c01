/**
 * A service that restarts its consumer (a config reload, a supervisor's retry) on the client it keeps for
 * weeks: each consumer's life must leave that client as it found it. Counted after a warm-up life and after
 * many more: the listeners on the amqplib channel and on each Redis client, and on the NATS connection its
 * status iterators and subscriptions (a pull left open keeps both, plus a timer, until it expires).
 */
import { randomUUID } from 'node:crypto';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import {
  type NatsConnection,
  connect as natsConnect,
  headers as natsHeaders,
} from '@nats-io/transport-node';
import amqp from 'amqplib';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer as amqpConsumer } from '../../../src/amqp/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer as natsConsumer } from '../../../src/nats/index.js';
import {
  type RedisStreamsClient,
  idempotentConsumer as streamsConsumer,
} from '../../../src/redis-streams/index.js';
import { env, requireService } from '../../helpers/env.js';
import { waitUntil } from '../../helpers/wait-until.js';

const run = randomUUID().slice(0, 8);
const LIVES = 15;

/** Every event an emitter has listeners for, with how many. */
function listenersOf(emitter: {
  eventNames(): (string | symbol)[];
  listenerCount(event: string | symbol): number;
}): Record<string, number> {
  return Object.fromEntries(
    emitter.eventNames().map((name) => [String(name), emitter.listenerCount(name)]),
  );
}

/** What a service's consumer does over its lives, and what its client holds after each. */
interface Lives {
  /** One life: start a consumer, have it handle message `i`, close it. */
  life(i: number): Promise<void>;
  /** What the long-lived client holds now. */
  held(): unknown;
}

/** The warm-up life, then `LIVES` more: what the client holds after each batch. */
async function liveAndCount(lives: Lives): Promise<{ afterWarmUp: unknown; after: unknown }> {
  await lives.life(0);
  const afterWarmUp = lives.held();
  for (let i = 1; i <= LIVES; i++) await lives.life(i);
  return { afterWarmUp, after: lives.held() };
}

const engine = () => createIdempotency({ store: memoryStore() });

describe('consumers restarted on one long-lived client', () => {
  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await requireService('NATS', env.natsUrl);
    await requireService('Redis', env.redisUrl);
  });

  describe('RabbitMQ', () => {
    const queue = `ik-soak.restarts-${run}`;
    let connection: amqp.ChannelModel;
    let admin: amqp.ConfirmChannel;

    beforeAll(async () => {
      connection = await amqp.connect(env.amqpUrl);
      admin = await connection.createConfirmChannel();
      await admin.assertQueue(queue, { durable: false });
    });
    afterAll(async () => {
      for (const name of [queue, `${queue}.retry`, `${queue}.dlq`]) {
        await admin?.deleteQueue(name).catch(() => {});
      }
      await connection?.close().catch(() => {});
    });

    it('leave the channel and its connection as they found them', async () => {
      // Arrange
      const channel = await connection.createConfirmChannel();
      const idempotency = engine();
      let handled = 0;
      // Act
      const counts = await liveAndCount({
        async life(i) {
          const consumer = await amqpConsumer(channel, async () => void handled++, {
            idempotency,
            name: 'restarts',
            queue,
          });
          admin.sendToQueue(queue, Buffer.from('{}'), { messageId: `m-${i}-${run}` });
          await admin.waitForConfirms();
          await waitUntil('the message to be handled', () => handled > i);
          expect(await consumer.close()).toBe(true);
        },
        held: () => ({ channel: listenersOf(channel), connection: listenersOf(connection) }),
      });
      // Assert
      expect(handled).toBe(LIVES + 1);
      expect(counts.after).toEqual(counts.afterWarmUp);
    });
  });

  describe('NATS JetStream', () => {
    const stream = `IK_SOAK_RESTARTS_${run.replace(/-/g, '_')}`;
    const subject = `ik-soak.restarts.${run}`;
    let admin: NatsConnection;
    let connection: NatsConnection;

    beforeAll(async () => {
      admin = await natsConnect({ servers: env.natsUrl });
      const jsm = await jetstreamManager(admin);
      await jsm.streams.add({ name: stream, subjects: [subject] });
      await jsm.consumers.add(stream, {
        durable_name: 'workers',
        ack_policy: AckPolicy.Explicit,
        filter_subject: subject,
      });
      connection = await natsConnect({ servers: env.natsUrl });
    });
    afterAll(async () => {
      await connection?.close().catch(() => {});
      await (await jetstreamManager(admin)).streams.delete(stream).catch(() => {});
      await admin?.close().catch(() => {});
    });

    it('leave the connection with no status iterator, subscription or pull of theirs', async () => {
      // Arrange
      const js = jetstream(connection);
      const idempotency = engine();
      let handled = 0;
      // The client's own tables (no public count): the status iterators an open pull registers, and
      // the subscriptions, one per open pull (the client's inbox subscription is always there).
      const protocol = (
        connection as unknown as {
          protocol: { listeners: unknown[]; subscriptions: { size(): number } };
        }
      ).protocol;
      // Act
      const counts = await liveAndCount({
        async life(i) {
          const consumer = await natsConsumer(
            await js.consumers.get(stream, 'workers'),
            async () => void handled++,
            { idempotency, name: 'restarts' },
          );
          const h = natsHeaders();
          h.set('x-idempotency-key', `m-${i}-${run}`);
          await jetstream(admin).publish(subject, new Uint8Array([1]), { headers: h });
          await waitUntil('the message to be handled', () => handled > i);
          expect(await consumer.close()).toBe(true);
          await consumer.done;
        },
        held: () => ({
          statusIterators: protocol.listeners.length,
          subscriptions: protocol.subscriptions.size(),
        }),
      });
      // Assert
      expect(handled).toBe(LIVES + 1);
      expect(counts.after).toEqual(counts.afterWarmUp);
    });
  });

  describe('Redis Streams', () => {
    const stream = `ik-soak:restarts:${run}`;
    let admin: ReturnType<typeof createClient>;

    beforeAll(async () => {
      admin = createClient({ url: env.redisUrl });
      await admin.connect();
    });
    afterAll(async () => {
      for (const lib of ['node-redis', 'ioredis']) {
        await admin?.sendCommand(['DEL', `${stream}:${lib}`, `${stream}:${lib}:dlq`]);
      }
      admin?.destroy();
    });

    const connected = {
      'node-redis': async () => {
        const client = createClient({ url: env.redisUrl });
        client.on('error', () => {});
        await client.connect();
        return { client, close: () => client.destroy() };
      },
      ioredis: async () => {
        const client = new Redis(env.redisUrl);
        client.on('error', () => {});
        return { client, close: () => client.disconnect() };
      },
    };

    for (const [lib, connect] of Object.entries(connected)) {
      it(`leave both ${lib} clients as they found them`, async () => {
        // Arrange
        const client = await connect();
        const blocking = await connect();
        const idempotency = engine();
        let handled = 0;
        try {
          // Act
          const counts = await liveAndCount({
            async life(i) {
              const consumer = await streamsConsumer(
                client.client as unknown as RedisStreamsClient,
                async () => void handled++,
                {
                  idempotency,
                  name: 'restarts',
                  stream: `${stream}:${lib}`,
                  group: 'workers',
                  blockingClient: blocking.client as unknown as RedisStreamsClient,
                  block: '50ms',
                },
              );
              await admin.sendCommand([
                'XADD',
                `${stream}:${lib}`,
                '*',
                'x-idempotency-key',
                `${lib}-${i}`,
              ]);
              await waitUntil('the entry to be handled', () => handled > i);
              expect(await consumer.close()).toBe(true);
            },
            held: () => ({
              client: listenersOf(client.client),
              blocking: listenersOf(blocking.client),
            }),
          });
          // Assert
          expect(handled).toBe(LIVES + 1);
          expect(counts.after).toEqual(counts.afterWarmUp);
        } finally {
          client.close();
          blocking.close();
        }
      });
    }
  });
});
