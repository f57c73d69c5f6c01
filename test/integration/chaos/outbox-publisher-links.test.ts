/**
 * The relay with the link to its broker blackholed mid-batch (Redis Streams with either client, NATS
 * JetStream), through a TCP proxy: publishes time out and fail, the rows are kept, and once the link heals
 * every row reaches the broker with its stable id. Re-sends are duplicates under the same id (ioredis also
 * resends the abandoned XADDs itself on reconnect); JetStream drops them in its duplicate window. A promise
 * of docs/outbox.md ("at-least-once publishing") not tested across a cut link before.
 */
import { randomBytes } from 'node:crypto';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { headers, connect as natsConnect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createRelay,
  enqueue,
  natsPublisher,
  type Publisher,
  postgresOutboxSource,
  redisStreamsPublisher,
} from '../../../src/outbox/index.js';
import { env, requireService } from '../../helpers/env.js';
import { type OutboxDatabase, openOutboxDatabase } from '../../helpers/outbox-postgres.js';
import { connectClient, type RedisLib } from '../../helpers/redis-clients.js';
import { startRedisProxy, startTcpProxy } from '../../helpers/tcp-proxy.js';
import { waitUntil } from '../../helpers/wait-until.js';

const run = randomBytes(4).toString('hex');
const ROWS = 20;

describe('outbox relay: the broker link blackholed mid-batch', () => {
  let db: OutboxDatabase;

  beforeAll(async () => {
    db = await openOutboxDatabase(4);
  });
  afterAll(() => db?.close());

  /**
   * Enqueue ROWS rows and relay them through `inner`, cutting the link once 5 publishes started and healing
   * it once one failed. Resolves when every row is marked sent, with the rows' ids and the failures.
   */
  async function relayAcrossACut(
    topic: string,
    inner: Publisher,
    link: { cut(): void; restore(): void },
  ) {
    const ids = await db.transaction(async (tx) => {
      const out: string[] = [];
      for (let i = 0; i < ROWS; i++) {
        out.push((await enqueue(tx, { topic, payload: { i } }, { schema: db.schema })).messageId);
      }
      return out;
    });
    let started = 0;
    const publisher: Publisher = {
      publish(message) {
        const confirmed = inner.publish(message);
        if (++started === 5) setImmediate(() => link.cut());
        return confirmed;
      },
    };
    const failures: string[] = [];
    const relay = createRelay({
      source: postgresOutboxSource({ pool: db.pool, schema: db.schema, listen: false }),
      publisher,
      batchSize: ROWS,
      concurrency: 4,
      leaseMs: 3000,
      publishTimeoutMs: 500,
      pollIntervalMs: 100,
      backoff: { initialMs: 200, maxMs: 400 },
      onPublishFailed: (_message, error) => failures.push(String(error)),
    });
    relay.start();
    await waitUntil('a publish to fail', () => failures.length > 0, 5000);
    link.restore();
    await waitUntil(
      'every row marked sent',
      async () =>
        (await db.rows()).every((row) => !ids.includes(row.message_id) || row.sent_at !== null),
      15_000,
    );
    await relay.stop();
    return { ids, failures };
  }

  it.each(['node-redis', 'ioredis'] as RedisLib[])(
    'Redis Streams (%s): every row lands in the stream with its id, at least once',
    async (lib) => {
      await requireService('Redis', env.redisUrl);
      const proxy = await startRedisProxy(env.redisUrl);
      const through = await connectClient(lib, proxy.url);
      const direct = await connectClient('node-redis', env.redisUrl);
      const stream = `ik-chaos:${run}:${lib}`;
      try {
        const { ids, failures } = await relayAcrossACut(
          `streams-${lib}`,
          redisStreamsPublisher({
            client: through.client as Parameters<typeof redisStreamsPublisher>[0]['client'],
            stream,
          }),
          proxy,
        );

        const reader = direct.client as unknown as {
          sendCommand(args: string[]): Promise<Array<[string, string[]]>>;
        };
        const entries = await reader.sendCommand(['XRANGE', stream, '-', '+']);
        // Field 0 is x-idempotency-key, the stable id.
        const messageIds = entries.map(([, fields]) => String(fields[1]));
        expect(failures[0]).toMatch(/not confirmed within 500 ms/);
        expect(new Set(messageIds)).toEqual(new Set(ids));
        await reader.sendCommand(['DEL', stream]);
      } finally {
        await through.close();
        await direct.close();
        await proxy.close();
      }
    },
  );

  it('NATS JetStream: every row lands in the stream once (re-sends are dropped as duplicates)', async () => {
    await requireService('NATS', env.natsUrl);
    const target = new URL(env.natsUrl);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
    const through = await natsConnect({
      servers: `127.0.0.1:${proxy.port}`,
      reconnectTimeWait: 100,
      maxReconnectAttempts: -1,
      pingInterval: 1000,
    });
    const direct = await natsConnect({ servers: env.natsUrl });
    const manager = await jetstreamManager(direct);
    const stream = `IK_CHAOS_${run}`;
    const subject = `ik-chaos.${run}`;
    await manager.streams.add({ name: stream, subjects: [subject] });
    try {
      const { failures } = await relayAcrossACut(
        'nats',
        natsPublisher({ js: jetstream(through), headers, subject: () => subject, timeoutMs: 400 }),
        proxy,
      );

      expect(failures.length).toBeGreaterThan(0);
      expect((await manager.streams.info(stream)).state.messages).toBe(ROWS);
    } finally {
      await manager.streams.delete(stream).catch(() => {});
      await through.close().catch(() => {});
      await direct.close();
      await proxy.close();
    }
  });
});
