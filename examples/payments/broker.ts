/**
 * The three ways `payment.initiated` travels from the relay to the worker: the in-process bus (the embedded
 * default), RabbitMQ (`AMQP_URL`) or NATS JetStream (`NATS_URL`). Each gives the relay a publisher that
 * carries the outbox's stable message id, and the worker an idempotent consumer keyed on that id.
 * @module
 */
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect, headers as natsHeaders } from '@nats-io/transport-node';
import amqp from 'amqplib';
import { idempotentConsumer as amqpConsumer } from '../../src/amqp/index.js';
import type { Idempotency } from '../../src/index.js';
import { idempotentConsumer as natsConsumer } from '../../src/nats/index.js';
import {
  amqpPublisher,
  createInProcessBus,
  natsPublisher,
  type Publisher,
} from '../../src/outbox/index.js';
import { consumeBus } from './bus-consumer.js';
import { type BrokerConfig, destination, PAYMENT_INITIATED, WORKER_NAME } from './config.js';
import type { WorkerContext } from './worker.js';

/** The worker's view of a message: its decoded body and the consumer's context. */
export type BodyHandler = (body: unknown, context: WorkerContext) => Promise<void>;

/** Options of a worker's consumer. */
export interface ConsumeOptions {
  /** The engine holding the worker's records. */
  engine: Idempotency;
  /** Messages handled at once. @default 10 */
  concurrency?: number;
  /** JetStream AckWait: how long a dead worker's messages stay invisible. @default 10000 */
  ackWaitMs?: number;
  /** Called for each duplicate acknowledged without running the handler. @default nothing */
  onDuplicate?: () => void;
}

/** A connected broker. */
export interface Broker {
  /** For the relay. */
  readonly publisher: Publisher;
  /** Start the worker's idempotent consumer; resolves to its close function. */
  consume(handler: BodyHandler, options: ConsumeOptions): Promise<() => Promise<unknown>>;
  /** Close the connections. */
  close(): Promise<void>;
}

// Handler errors (a database blip) are retried with backoff; only a message failing this many times in a
// row is dead-lettered. Deliveries refused because another worker holds the key do not count.
const MAX_DELIVERIES = 20;

/**
 * Connect to the configured broker. A lost connection ends the process (`onLost`): let your supervisor
 * restart it, as it would after a crash; the outbox and the broker keep every message meanwhile.
 * @example
 * const broker = await connectBroker({ kind: 'bus' }, () => process.exit(1));
 */
export async function connectBroker(
  config: BrokerConfig,
  onLost: (error: unknown) => void,
): Promise<Broker> {
  switch (config.kind) {
    case 'bus': {
      const bus = createInProcessBus();
      return {
        publisher: bus,
        async consume(handler, options) {
          const stop = consumeBus(bus, handler, {
            engine: options.engine,
            name: WORKER_NAME,
            topic: PAYMENT_INITIATED,
            ...(options.onDuplicate ? { onDuplicate: options.onDuplicate } : {}),
          });
          return async () => stop();
        },
        async close() {},
      };
    }
    case 'amqp': {
      const queue = destination(config.prefix, PAYMENT_INITIATED);
      const connection = await amqp.connect(config.url);
      connection.on('error', (error: unknown) => onLost(error));
      connection.on('close', () => onLost(new Error('RabbitMQ connection closed')));
      // Confirm channels: a publish counts only once RabbitMQ has the message (then the row is marked sent).
      const publishChannel = await connection.createConfirmChannel();
      await publishChannel.assertQueue(queue, { durable: true });
      return {
        publisher: amqpPublisher({
          channel: publishChannel,
          routingKey: (message) => destination(config.prefix, message.topic),
        }),
        async consume(handler, options) {
          const channel = await connection.createConfirmChannel();
          const consumer = await amqpConsumer(
            channel,
            (message, context) => handler(JSON.parse(message.content.toString('utf8')), context),
            {
              queue,
              name: WORKER_NAME,
              idempotency: options.engine,
              concurrency: options.concurrency ?? 10,
              maxDeliveries: MAX_DELIVERIES,
              maxRetryDelay: '2s',
              ...(options.onDuplicate ? { hooks: { onDuplicate: options.onDuplicate } } : {}),
            },
          );
          return () => consumer.close();
        },
        async close() {
          connection.removeAllListeners('close');
          await connection.close().catch(() => {});
        },
      };
    }
    case 'nats': {
      const subject = destination(config.prefix, PAYMENT_INITIATED);
      const deadLetters = destination(config.prefix, `${PAYMENT_INITIATED}.dlq`);
      const nc = await natsConnect({ servers: config.url });
      void nc.closed().then((error) => {
        if (error) onLost(error);
      });
      const jsm = await jetstreamManager(nc);
      // Created by whichever process starts first; the others find it.
      await jsm.streams
        .add({ name: config.stream, subjects: [subject, deadLetters] })
        .catch(async (error) => {
          if ((await jsm.streams.info(config.stream).catch(() => undefined)) === undefined)
            throw error;
        });
      const js = jetstream(nc);
      return {
        // Nats-Msg-Id = the outbox id: the stream itself drops a relay's re-send within its window.
        publisher: natsPublisher({
          js,
          headers: natsHeaders,
          subject: (message) => destination(config.prefix, message.topic),
        }),
        async consume(handler, options) {
          await jsm.consumers
            .add(config.stream, {
              durable_name: WORKER_NAME,
              ack_policy: AckPolicy.Explicit,
              filter_subject: subject,
              ack_wait: (options.ackWaitMs ?? 10_000) * 1_000_000,
              // The idempotent consumer decides when to give up (dead letter), not the server.
              max_deliver: -1,
            })
            .catch(async (error) => {
              const existing = await jsm.consumers
                .info(config.stream, WORKER_NAME)
                .catch(() => undefined);
              if (existing === undefined) throw error;
            });
          const consumer = await natsConsumer(
            await js.consumers.get(config.stream, WORKER_NAME),
            (message, context) =>
              handler(JSON.parse(Buffer.from(message.data).toString('utf8')), context),
            {
              name: WORKER_NAME,
              idempotency: options.engine,
              concurrency: options.concurrency ?? 10,
              maxDeliveries: MAX_DELIVERIES,
              maxRetryDelay: '2s',
              publisher: js,
              deadLetterSubject: deadLetters,
              ...(options.onDuplicate ? { hooks: { onDuplicate: options.onDuplicate } } : {}),
            },
          );
          return () => consumer.close();
        },
        async close() {
          await nc.drain().catch(() => {});
        },
      };
    }
  }
}
