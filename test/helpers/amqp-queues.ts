/**
 * RabbitMQ resources for the adapter's own integration tests: a unique queue per case (and its retry and
 * dead-letter queues, deleted afterwards), an admin channel to publish and inspect, and consumers on
 * connections of their own, which a test can close to see what the broker requeues.
 */
import { randomUUID } from 'node:crypto';
import { type ChannelModel, type ConfirmChannel, connect } from 'amqplib';
import {
  type AmqpConsumer,
  type AmqpConsumerOptions,
  type AmqpMessage,
  type ConsumerHandler,
  idempotentConsumer,
} from '../../src/amqp/index.js';
import { type AmqpFrameProxy, startAmqpFrameProxy } from './amqp-frame-proxy.js';
import { env } from './env.js';
import { waitUntil as pollUntil } from './wait-until.js';

/** Poll `predicate` until it holds, or fail after `timeoutMs` with `what`. */
export function waitUntil(
  what: string,
  predicate: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
): Promise<void> {
  return pollUntil(what, predicate, timeoutMs, 25);
}

/** The queues, connections and consumers of one test file. */
export class AmqpQueues {
  private readonly run = randomUUID().slice(0, 8);
  private readonly queues = new Set<string>();
  private readonly connections: ChannelModel[] = [];
  private readonly proxies: AmqpFrameProxy[] = [];
  private admin!: ChannelModel;
  /** A confirm channel to publish with and inspect queues. */
  channel!: ConfirmChannel;

  async open(): Promise<void> {
    this.admin = await connect(env.amqpUrl);
    this.channel = await this.admin.createConfirmChannel();
  }

  /** A new queue named after `name` (its `.retry` and `.dlq` are deleted with it). */
  async queue(name: string): Promise<string> {
    const queue = `ik-test.${this.run}-${name}`;
    this.forget(queue, `${queue}.retry`, `${queue}.dlq`);
    await this.channel.assertQueue(queue, { durable: false });
    return queue;
  }

  /** Delete these queues (too) at the end. */
  forget(...queues: string[]): void {
    for (const queue of queues) this.queues.add(queue);
  }

  async publish(queue: string, body: string, options: object): Promise<void> {
    this.channel.sendToQueue(queue, Buffer.from(body), options);
    await this.channel.waitForConfirms();
  }

  /** A confirm channel on a connection of its own (closed at the end, or by the test). */
  async consumerChannel(): Promise<{ connection: ChannelModel; channel: ConfirmChannel }> {
    const connection = await connect(env.amqpUrl);
    connection.on('error', () => {});
    this.connections.push(connection);
    const channel = await connection.createConfirmChannel();
    channel.on('error', () => {});
    return { connection, channel };
  }

  /**
   * A confirm channel on a connection of its own through a frame proxy of its own (both closed at the
   * end), for a test that withholds or holds back some of the broker's frames (amqp-frame-proxy.ts).
   */
  async proxiedChannel(): Promise<{
    proxy: AmqpFrameProxy;
    connection: ChannelModel;
    channel: ConfirmChannel;
  }> {
    const proxy = await startAmqpFrameProxy(env.amqpUrl);
    this.proxies.push(proxy);
    const connection = await connect(proxy.url);
    connection.on('error', () => {});
    const channel = await connection.createConfirmChannel();
    channel.on('error', () => {});
    return { proxy, connection, channel };
  }

  /** Start a consumer on a channel of its own. */
  async start(
    handler: ConsumerHandler<AmqpMessage>,
    options: AmqpConsumerOptions,
  ): Promise<AmqpConsumer & { connection: ChannelModel }> {
    const { connection, channel } = await this.consumerChannel();
    const consumer = await idempotentConsumer(channel, handler, options);
    return Object.assign(consumer, { connection });
  }

  /** Take every message of `queue`. */
  async drain(queue: string): Promise<AmqpMessage[]> {
    const messages: AmqpMessage[] = [];
    for (;;) {
      const message = await this.channel.get(queue, { noAck: true });
      if (message === false) return messages;
      messages.push(message as unknown as AmqpMessage);
    }
  }

  /** Messages ready in `queue`. */
  async count(queue: string): Promise<number> {
    return (await this.channel.checkQueue(queue)).messageCount;
  }

  async close(): Promise<void> {
    // A proxied connection goes with its proxy: its close could wait on a frame the proxy holds.
    for (const proxy of this.proxies) await proxy.close();
    for (const connection of this.connections) await connection.close().catch(() => {});
    for (const queue of this.queues) await this.channel.deleteQueue(queue).catch(() => {});
    await this.admin.close().catch(() => {});
  }
}
