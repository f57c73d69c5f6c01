/**
 * Transactional outbox on PostgreSQL: the idempotency record, the payment row and the `payment.initiated`
 * message commit in one transaction; a relay publishes the message with a stable id; the receiving side
 * sees it once (and would deduplicate a re-send by that id).
 *
 * Run: `npx tsx examples/outbox-postgres.ts`. DATABASE_URL defaults to postgres://postgres@127.0.0.1:5432/test.
 * Set AMQP_URL (RabbitMQ) or NATS_URL (JetStream) to publish to a broker; otherwise an in-process bus is used.
 * In your code, import from `idempotency-kit/postgres` and `idempotency-kit/outbox`.
 * @module
 */
import { DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { headers, connect as natsConnect } from '@nats-io/transport-node';
import amqp from 'amqplib';
import pg from 'pg';
import {
  amqpPublisher,
  createInProcessBus,
  createRelay,
  decodePayload,
  enqueue,
  migrateOutbox,
  natsPublisher,
  type Publisher,
  postgresOutboxSource,
} from '../src/outbox/index.js';
import { migrate, postgresTransactional } from '../src/postgres/index.js';

const pool = new pg.Pool({
  connectionString: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  max: 10,
});
// node-postgres emits 'error' when an idle connection dies; without a listener that crashes the process.
pool.on('error', (error) => console.error('idle PostgreSQL connection failed:', error.message));

const schema = 'outbox_example';
const topic = 'payment.initiated';

/** Pick the broker from the environment; returns the publisher and a function that closes it. */
async function connectBroker(received: (id: string, body: unknown) => void): Promise<{
  publisher: Publisher;
  close: () => Promise<void>;
}> {
  if (process.env.AMQP_URL) {
    const connection = await amqp.connect(process.env.AMQP_URL);
    // amqplib emits 'error' on a broker restart or a channel-level error; unhandled, it ends the process.
    // A closed channel is not reopened: a real relay creates a new channel and publisher (see docs/outbox.md).
    connection.on('error', (error) => console.error('RabbitMQ connection failed:', error.message));
    // A confirm channel: publish() resolves only once RabbitMQ has the message.
    const channel = await connection.createConfirmChannel();
    channel.on('error', (error) => console.error('RabbitMQ channel failed:', error.message));
    await channel.assertQueue(topic, { durable: true });
    await channel.consume(topic, (message) => {
      if (message === null) return;
      received(String(message.properties.messageId), JSON.parse(message.content.toString()));
      channel.ack(message);
    });
    return { publisher: amqpPublisher({ channel }), close: () => connection.close() };
  }
  if (process.env.NATS_URL) {
    const nc = await natsConnect({ servers: process.env.NATS_URL });
    const jsm = await jetstreamManager(nc);
    // A stream of this example's own: PAYMENTS is the payments example's (`NATS_URL=… npm start`), whose
    // subjects differ, so sharing that name broke whichever of the two ran second.
    const stream = 'OUTBOX_EXAMPLE';
    await jsm.streams.add({ name: stream, subjects: [topic] }).catch(async (error) => {
      // Made by an earlier run; any other refusal (another stream holding the subject) is the error.
      if ((await jsm.streams.info(stream).catch(() => undefined)) === undefined) throw error;
    });
    const js = jetstream(nc);
    // The receiving side: an ordered consumer of what arrives from now on (the stream keeps earlier runs).
    const consumer = await js.consumers.get(stream, { deliver_policy: DeliverPolicy.New });
    const messages = await consumer.consume();
    void (async () => {
      for await (const message of messages) {
        received(message.headers?.get('Nats-Msg-Id') ?? '?', message.json());
      }
    })();
    return {
      publisher: natsPublisher({
        js,
        headers,
        onDuplicate: (message) => console.log(`JetStream dropped a re-send of ${message.id}`),
      }),
      close: async () => {
        await messages.close();
        await nc.close();
      },
    };
  }
  const bus = createInProcessBus();
  bus.subscribe(topic, (message) => received(message.id, decodePayload(message)));
  return { publisher: bus, close: async () => {} };
}

async function main(): Promise<void> {
  // Once per deployment: the records table, the outbox table, and the business table.
  await migrate(pool, { schema });
  await migrateOutbox(pool, { schema });
  await pool.query(
    `CREATE TABLE IF NOT EXISTS ${schema}.payments (id text PRIMARY KEY, amount int NOT NULL, status text NOT NULL)`,
  );

  const { publisher, close } = await connectBroker((id, body) =>
    console.log(`received ${id}: ${JSON.stringify(body)}`),
  );
  // Usually its own process (or several): relays share the table safely.
  const relay = createRelay({
    source: postgresOutboxSource({ pool, schema }),
    publisher,
    retentionMs: 24 * 3600_000,
    onPublished: (message) => console.log(`published ${message.id} (attempt ${message.attempt})`),
    onPublishFailed: (message, error, retryInMs) =>
      console.warn(`publish of ${message.id} failed (${String(error)}), retry in ${retryInMs} ms`),
  });
  relay.start();

  // The API side: a client retries the same request three times at once.
  const transactional = postgresTransactional({ pool, schema, namespace: 'payments' });
  const key = `payment-${Date.now()}`;
  const request = { key, payload: { amount: 4200 } };
  const outcomes = await Promise.all(
    [1, 2, 3].map(() =>
      transactional.runInTransaction(request, async (tx) => {
        await tx.query(
          `INSERT INTO ${schema}.payments (id, amount, status) VALUES ($1, $2, 'initiated')`,
          [key, 4200],
        );
        // Same transaction: the message exists if and only if the payment row and the record do.
        const { messageId } = await enqueue(
          tx,
          {
            topic,
            key,
            payload: { paymentId: key, amount: 4200 },
            // Stable across retries of this request: consumers and JetStream deduplicate on it.
            messageId: tx.downstreamKey(topic),
          },
          { schema },
        );
        return { paymentId: key, messageId };
      }),
    ),
  );
  console.log(`API answers: ${outcomes.map((outcome) => outcome.status).join(', ')}`);

  // Give the relay a moment, then shut down gracefully (the batch in flight finishes first).
  await new Promise((resolve) => setTimeout(resolve, 1000));
  await relay.stop();
  console.log('outbox backlog:', await relay.stats());
  await close();
}

main()
  .catch((error) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(() => pool.end());
