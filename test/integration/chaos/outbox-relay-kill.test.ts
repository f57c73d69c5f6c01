/**
 * kill -9 of a relay process mid-batch (PostgreSQL to RabbitMQ): rows it had confirmed but not marked, and
 * rows it had claimed and not published yet, all reach the queue once another relay takes them over after
 * the lease, with their stable ids; none is lost (docs/outbox.md, "What it does not guarantee": a crash
 * between the confirm and the mark re-publishes with the same id). Not tested with a real SIGKILL before.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  amqpPublisher,
  createRelay,
  enqueue,
  postgresOutboxSource,
} from '../../../src/outbox/index.js';
import { env, requireService } from '../../helpers/env.js';
import { type OutboxDatabase, openOutboxDatabase } from '../../helpers/outbox-postgres.js';
import { waitUntil } from '../../helpers/wait-until.js';

const ROWS = 20;

describe('outbox relay: kill -9 mid-batch', () => {
  let db: OutboxDatabase;
  let connection: amqp.ChannelModel;
  let channel: amqp.ConfirmChannel;
  let child: ChildProcess | undefined;
  const queue = `ik-chaos.kill-${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    db = await openOutboxDatabase(4);
    connection = await amqp.connect(env.amqpUrl);
    channel = await connection.createConfirmChannel();
    await channel.assertQueue(queue, { durable: false });
  });
  afterAll(async () => {
    if (child?.exitCode === null) child.kill('SIGKILL');
    await channel?.deleteQueue(queue).catch(() => {});
    await connection?.close().catch(() => {});
    await db?.close();
  });

  it('re-publishes, after the lease, every row of the killed batch with its id: none lost', async () => {
    // Arrange
    const ids = await db.transaction(async (tx) => {
      const out: string[] = [];
      for (let i = 0; i < ROWS; i++) {
        out.push(
          (await enqueue(tx, { topic: 'kill', payload: { i } }, { schema: db.schema })).messageId,
        );
      }
      return out;
    });
    const script = fileURLToPath(new URL('./relay-kill-child.ts', import.meta.url));
    const confirmed: string[] = [];
    const running = fork(script, [db.schema, queue], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    child = running;
    running.on('message', (message) => {
      if (typeof message === 'string' && ids.includes(message)) confirmed.push(message);
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      running.once('exit', (_code, signal) => resolve(signal)),
    );

    // Act: kill it once a few publishes are confirmed, long before its batch is marked.
    await waitUntil('5 confirmed publishes', () => confirmed.length >= 5, 20_000);
    running.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    const killedAfter = [...confirmed];
    const unsentAtKill = (await db.rows()).filter((row) => row.sent_at === null).length;
    const survivor = createRelay({
      source: postgresOutboxSource({ pool: db.pool, schema: db.schema, listen: false }),
      publisher: amqpPublisher({ channel, routingKey: () => queue }),
      pollIntervalMs: 100,
    });
    survivor.start();
    await waitUntil(
      'every row marked sent',
      async () => (await db.rows()).every((row) => row.sent_at !== null),
      15_000,
    );
    await survivor.stop();

    // Assert
    const received: string[] = [];
    for (;;) {
      const message = await channel.get(queue, { noAck: true });
      if (message === false) break;
      received.push(message.properties.messageId);
    }
    expect(unsentAtKill).toBe(ROWS); // the killed relay marked nothing
    expect(new Set(received)).toEqual(new Set(ids));
    // What it had confirmed is delivered again, under the same id: the consumer's to deduplicate.
    for (const id of killedAfter) {
      expect(received.filter((m) => m === id).length).toBeGreaterThanOrEqual(2);
    }
  });
});
