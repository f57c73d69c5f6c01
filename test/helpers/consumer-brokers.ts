/**
 * One harness per broker for the consumer conformance suite: unique resources per case, publishing,
 * starting an idempotent consumer, reading dead letters, and cleanup. Also used by the crash child
 * (`consumer-child.ts`), so a consumer in another process is built exactly like one in the test.
 */

import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect, headers as natsHeaders } from '@nats-io/transport-node';
import { connect as amqpConnect } from 'amqplib';
import { createClient } from 'redis';
import { idempotentConsumer as amqpConsumer } from '../../src/amqp/index.js';
import type { ConsumerHandler, ConsumerOptions } from '../../src/consumer/index.js';
import { idempotentConsumer as natsConsumer } from '../../src/nats/index.js';
import { idempotentConsumer as streamsConsumer } from '../../src/redis-streams/index.js';
import { env } from './env.js';

/** The brokers the suite runs against. */
export type BrokerName = 'amqp' | 'nats' | 'redis-streams';

/** A dead letter as the suite checks it, whatever the broker. */
export interface DeadLetterView {
  key: string | undefined;
  error: { name: string; message: string };
  deliveries: number;
  reason: string;
}

/** What a test passes to start a consumer (the broker-specific options are the harness's). */
export type StartOptions = Omit<ConsumerOptions<unknown>, 'key' | 'fingerprint' | 'hooks'> & {
  hooks?: ConsumerOptions<unknown>['hooks'];
};

/** A running consumer. */
export interface RunningConsumer {
  close(): Promise<unknown>;
}

/** Resources of one test case on one broker. */
export interface BrokerCase {
  /** Publish one message carrying idempotency key `key`. */
  publish(key: string, body: string): Promise<void>;
  /** Start a consumer on its own connection. */
  start(handler: ConsumerHandler<unknown>, options: StartOptions): Promise<RunningConsumer>;
  /** Everything in the dead-letter destination. */
  deadLetters(): Promise<DeadLetterView[]>;
  /**
   * Messages delivered to the case's consumers and not settled yet (acked, or terminated, or handed
   * back): seen at the broker (RabbitMQ: at the consumers' channels), not through hooks, which are silent
   * once a consumer's `close()` resolved.
   */
  unacked(): Promise<number>;
  /** Close connections and delete the case's queues, streams or keys. */
  destroy(): Promise<void>;
}

/** How the broker redelivers a crashed consumer's message, tuned short for tests. */
export const BROKER_TIMING = {
  /** JetStream AckWait of the test consumers. */
  natsAckWaitMs: 1500,
  /** Redis Streams min idle before XAUTOCLAIM. */
  streamsMinIdleMs: 1500,
};

function parseError(value: unknown): { name: string; message: string } {
  try {
    return JSON.parse(String(value)) as { name: string; message: string };
  } catch {
    return { name: 'unparsed', message: String(value) };
  }
}

/** An amqplib confirm channel. */
type AmqpChannel = Awaited<
  ReturnType<Awaited<ReturnType<typeof amqpConnect>>['createConfirmChannel']>
>;

/**
 * The delivery tags `channel` received and has not acked or nacked yet (a multiple ack's or nack's
 * included), kept up to date by wrapping its `consume`, `ack` and `nack`: RabbitMQ tells no client how
 * many of a queue's messages are unacked. Tags of a channel that closed (its messages requeued) stay.
 */
function trackUnsettled(channel: AmqpChannel): Set<number> {
  const open = new Set<number>();
  const settle = (tag: number, allUpTo: boolean | undefined) => {
    for (const each of [...open])
      if (each === tag || (allUpTo === true && each < tag)) open.delete(each);
  };
  const { consume, ack, nack } = channel;
  channel.consume = (queue, onMessage, options) =>
    consume.call(
      channel,
      queue,
      (message) => {
        if (message !== null) open.add(message.fields.deliveryTag);
        onMessage(message);
      },
      options,
    );
  channel.ack = (message, allUpTo) => {
    settle(message.fields.deliveryTag, allUpTo);
    ack.call(channel, message, allUpTo);
  };
  channel.nack = (message, allUpTo, requeue) => {
    settle(message.fields.deliveryTag, allUpTo);
    nack.call(channel, message, allUpTo, requeue);
  };
  return open;
}

async function amqpCase(id: string): Promise<BrokerCase> {
  const queue = `ik-test.${id}`;
  const admin = await amqpConnect(env.amqpUrl);
  const channel = await admin.createConfirmChannel();
  await channel.assertQueue(queue, { durable: false });
  const connections: Array<{ close(): Promise<void> }> = [admin];
  const unsettled: Array<Set<number>> = [];
  return {
    async publish(key, body) {
      channel.sendToQueue(queue, Buffer.from(body), { messageId: key });
      await channel.waitForConfirms();
    },
    async start(handler, options) {
      const connection = await amqpConnect(env.amqpUrl);
      connections.push(connection);
      const consumerChannel = await connection.createConfirmChannel();
      unsettled.push(trackUnsettled(consumerChannel));
      return amqpConsumer(consumerChannel, handler as ConsumerHandler<unknown>, {
        ...options,
        queue,
      });
    },
    async unacked() {
      return unsettled.reduce((sum, open) => sum + open.size, 0);
    },
    async deadLetters() {
      const letters: DeadLetterView[] = [];
      for (;;) {
        const message = await channel.get(`${queue}.dlq`, { noAck: true });
        if (message === false) return letters;
        const headers = message.properties.headers ?? {};
        letters.push({
          key: message.properties.messageId,
          error: parseError(headers['x-idempotency-error']),
          deliveries: Number(headers['x-idempotency-dead-letter-deliveries']),
          reason: String(headers['x-idempotency-dead-letter-reason']),
        });
      }
    },
    async destroy() {
      for (const name of [queue, `${queue}.retry`, `${queue}.dlq`]) await channel.deleteQueue(name);
      for (const connection of connections) await connection.close().catch(() => {});
    },
  };
}

async function natsCase(id: string): Promise<BrokerCase> {
  const stream = `IK_TEST_${id.replace(/[^A-Za-z0-9]/g, '_')}`;
  const subject = `ik-test.${id}.msgs`;
  const dlqSubject = `ik-test.${id}.dlq`;
  const durable = 'workers';
  const admin = await natsConnect({ servers: env.natsUrl });
  const jsm = await jetstreamManager(admin);
  await jsm.streams.add({ name: stream, subjects: [subject, dlqSubject] });
  await jsm.consumers.add(stream, {
    durable_name: durable,
    ack_policy: AckPolicy.Explicit,
    filter_subject: subject,
    ack_wait: BROKER_TIMING.natsAckWaitMs * 1_000_000,
    max_deliver: -1,
  });
  const js = jetstream(admin);
  const connections: Array<{ close(): Promise<void> }> = [];
  return {
    async publish(key, body) {
      // x-idempotency-key rather than Nats-Msg-Id: the stream would drop the copies itself otherwise, and
      // this suite is about what the consumer does with duplicates that reach it.
      const h = natsHeaders();
      h.set('x-idempotency-key', key);
      await js.publish(subject, new TextEncoder().encode(body), { headers: h });
    },
    async start(handler, options) {
      const connection = await natsConnect({ servers: env.natsUrl });
      connections.push(connection);
      const consumerJs = jetstream(connection);
      const consumer = await consumerJs.consumers.get(stream, durable);
      return natsConsumer(consumer, handler as ConsumerHandler<unknown>, {
        ...options,
        publisher: consumerJs,
        deadLetterSubject: dlqSubject,
      });
    },
    async deadLetters() {
      const letters: DeadLetterView[] = [];
      const info = await jsm.streams.info(stream);
      for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
        const message = await jsm.streams.getMessage(stream, { seq }).catch(() => null);
        if (message === null || message.subject !== dlqSubject) continue;
        letters.push({
          key: message.header.get('x-idempotency-key') || undefined,
          error: parseError(message.header.get('x-idempotency-error')),
          deliveries: Number(message.header.get('x-idempotency-deliveries')),
          reason: message.header.get('x-idempotency-dead-letter-reason'),
        });
      }
      return letters;
    },
    async unacked() {
      const info = await jsm.consumers.info(stream, durable);
      return info.num_ack_pending;
    },
    async destroy() {
      for (const connection of connections) await connection.close().catch(() => {});
      await jsm.streams.delete(stream).catch(() => {});
      await admin.close();
    },
  };
}

async function streamsCase(id: string): Promise<BrokerCase> {
  const stream = `ik-test:${id}`;
  const group = 'workers';
  const admin = createClient({ url: env.redisUrl });
  await admin.connect();
  const clients: Array<{ destroy(): void }> = [];
  let consumers = 0;
  return {
    async publish(key, body) {
      await admin.sendCommand(['XADD', stream, '*', 'x-idempotency-key', key, 'body', body]);
    },
    async start(handler, options) {
      const client = createClient({ url: env.redisUrl });
      const blocking = createClient({ url: env.redisUrl });
      await Promise.all([client.connect(), blocking.connect()]);
      clients.push(client, blocking);
      consumers++;
      return streamsConsumer(client, handler as ConsumerHandler<unknown>, {
        ...options,
        stream,
        group,
        consumer: `${options.name}-${process.pid}-${consumers}`,
        blockingClient: blocking,
        block: '200ms',
        minIdle: BROKER_TIMING.streamsMinIdleMs,
        claimInterval: '100ms',
      });
    },
    async deadLetters() {
      const reply = (await admin.sendCommand(['XRANGE', `${stream}:dlq`, '-', '+'])) as Array<
        [string, string[]]
      >;
      return reply.map(([, flat]) => {
        const fields: Record<string, string> = {};
        for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
        return {
          key: fields['x-idempotency-key'],
          error: parseError(fields['x-idempotency-error']),
          deliveries: Number(fields['x-idempotency-deliveries']),
          reason: String(fields['x-idempotency-dead-letter-reason']),
        };
      });
    },
    async unacked() {
      // XPENDING's summary: [count, lowest id, highest id, consumers]; no group yet, nothing delivered.
      const reply = (await admin
        .sendCommand(['XPENDING', stream, group])
        .catch(() => [0])) as unknown[];
      return Number(reply[0] ?? 0);
    },
    async destroy() {
      for (const client of clients) client.destroy();
      await admin.sendCommand(['DEL', stream, `${stream}:dlq`]);
      admin.destroy();
    },
  };
}

/** Create the resources of case `id` on `broker`. */
export function openBrokerCase(broker: BrokerName, id: string): Promise<BrokerCase> {
  switch (broker) {
    case 'amqp':
      return amqpCase(id);
    case 'nats':
      return natsCase(id);
    case 'redis-streams':
      return streamsCase(id);
  }
}
