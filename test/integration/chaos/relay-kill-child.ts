/**
 * A relay in a child process, for kill -9 tests: PostgreSQL source (schema argv[2]) to a RabbitMQ queue
 * (argv[3]) through a confirm channel, each publish held a little so that a batch takes a while. Reports
 * each confirmed message id to the parent, which kills the process mid-batch.
 * @module
 */
import amqp from 'amqplib';
import pg from 'pg';
import { amqpPublisher, createRelay, postgresOutboxSource } from '../../../src/outbox/index.js';
import { env } from '../../helpers/env.js';

const [schema, queue] = process.argv.slice(2);
if (schema === undefined || queue === undefined) {
  throw new Error('usage: relay-kill-child <schema> <queue>');
}
const pool = new pg.Pool({ connectionString: env.databaseUrl, max: 2 });
pool.on('error', () => {});
const connection = await amqp.connect(env.amqpUrl);
const channel = await connection.createConfirmChannel();
const inner = amqpPublisher({ channel, routingKey: () => queue });
const relay = createRelay({
  source: postgresOutboxSource({ pool, schema, listen: false }),
  publisher: {
    async publish(message) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      await inner.publish(message);
    },
  },
  batchSize: 20,
  concurrency: 2,
  // The whole batch fits in the lease (no row deferred): the kill lands before its one mark.
  leaseMs: 3000,
  publishTimeoutMs: 300,
  onPublished: (message) => process.send?.(message.id),
});
process.send?.('ready');
await relay.drain();
process.send?.('drained');
