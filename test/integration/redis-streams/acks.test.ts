/**
 * The Redis Streams consumer's batched acks against a real Redis: the acks of one burst share one `XACK`,
 * yet every entry is acked, each message counts as settled only once Redis has answered the `XACK` that
 * carried it, a failed `XACK` leaves every entry of its batch pending for a later redelivery, and `close()`
 * waits for acks still on their way.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer, type StreamEntry } from '../../../src/redis-streams/index.js';
import { env, requireService } from '../../helpers/env.js';
import { waitUntil as pollUntil } from '../../helpers/wait-until.js';

type Client = ReturnType<typeof createClient>;
type ConsumerClient = Parameters<typeof idempotentConsumer>[0];
type ConsumerOptions = Parameters<typeof idempotentConsumer>[2];

// This file's timeout, polling every 10 ms.
const waitUntil = (what: string, predicate: () => boolean, timeoutMs = 15_000) =>
  pollUntil(what, predicate, timeoutMs, 10);

/**
 * `client` as the consumer sees it, recording every `XACK`: its ids, and the ids whose reply came back.
 * `failNext` makes that many `XACK`s fail without reaching Redis (a dropped connection, as the consumer
 * sees it); `delayMs` holds each `XACK` that long before sending it.
 */
function recording(client: Client | Redis) {
  const send = (args: string[]) =>
    client instanceof Redis
      ? client.call(args[0]!, ...args.slice(1))
      : (client as Client).sendCommand(args);
  const xacks: string[][] = [];
  const answered = new Set<string>();
  const control = { failNext: 0, delayMs: 0 };
  const consumerClient = {
    async sendCommand(args: string[]): Promise<unknown> {
      if (args[0] !== 'XACK') return send(args);
      const ids = args.slice(3);
      xacks.push(ids);
      if (control.failNext > 0) {
        control.failNext--;
        throw new Error('XACK failed (injected)');
      }
      if (control.delayMs > 0) await sleep(control.delayMs);
      const reply = await send(args);
      for (const id of ids) answered.add(id);
      return reply;
    },
  };
  // What an ioredis client offers the consumer instead of `sendCommand`.
  const ioredisShaped = {
    call: (command: string, ...args: string[]) => consumerClient.sendCommand([command, ...args]),
  };
  return { consumerClient, ioredisShaped, xacks, answered, control };
}

describe('Redis Streams consumer: batched acks', () => {
  const run = randomUUID().slice(0, 8);
  const streams: string[] = [];
  const closers: Array<() => Promise<unknown>> = [];
  let client: Client;
  let blocking: Client;

  beforeAll(async () => {
    await requireService('Redis', env.redisUrl);
    client = createClient({ url: env.redisUrl });
    blocking = client.duplicate();
    await Promise.all([client.connect(), blocking.connect()]);
  });

  afterAll(async () => {
    for (const close of closers) await close().catch(() => {});
    if (client === undefined) return;
    if (streams.length > 0) await client.sendCommand(['DEL', ...streams]);
    client.destroy();
    blocking.destroy();
  });

  /** A new stream holding `count` entries with distinct keys; returns it and the entries' ids. */
  async function streamOf(name: string, count: number): Promise<{ stream: string; ids: string[] }> {
    const stream = `ik-test:streams-acks:${run}:${name}`;
    streams.push(stream, `${stream}:dlq`);
    const ids = await Promise.all(
      Array.from(
        { length: count },
        (_, i) =>
          client.sendCommand([
            'XADD',
            stream,
            '*',
            'x-idempotency-key',
            `${name}-${i}`,
          ]) as Promise<string>,
      ),
    );
    return { stream, ids };
  }

  /** Entries read by the group and not yet acked. */
  async function pendingCount(stream: string): Promise<number> {
    const [count] = (await client.sendCommand(['XPENDING', stream, 'workers'])) as [number];
    return Number(count);
  }

  /**
   * Start the consumer under test on `stream` (group `workers`, a memory store, reading with `blocking`
   * every 100 ms) through `consumerClient`, with `options` on top; it is closed after the tests.
   */
  async function startConsumer(
    name: string,
    stream: string,
    consumerClient: ConsumerClient,
    handler: () => void,
    options: Partial<ConsumerOptions>,
  ) {
    const consumer = await idempotentConsumer(consumerClient, handler, {
      stream,
      group: 'workers',
      name: `acks-${name}-${run}`,
      idempotency: createIdempotency({ store: memoryStore() }),
      blockingClient: blocking,
      block: '100ms',
      ...options,
    });
    closers.push(() => consumer.close());
    return consumer;
  }

  /**
   * Consume `count` new entries, 50 in flight, through a recording of `source` (node-redis or ioredis), and
   * check that every entry was acked, none counted as settled before its XACK's reply, with at most
   * `count / 10` XACKs (one per entry would be `count`), leaving nothing pending.
   */
  async function expectBatchedAcks(
    name: string,
    count: number,
    source: Client | Redis,
    reader: Client | Redis,
  ) {
    // Arrange
    const { stream, ids } = await streamOf(name, count);
    const { consumerClient, ioredisShaped, xacks, answered } = recording(source);
    const settledBeforeReply: string[] = [];
    let executed = 0;
    // Act
    const consumer = await startConsumer(
      name,
      stream,
      source instanceof Redis ? ioredisShaped : consumerClient,
      () => {},
      {
        blockingClient: reader,
        concurrency: 50,
        hooks: {
          onExecuted: ({ message }: { message: StreamEntry }) => {
            executed++;
            if (!answered.has(message.id)) settledBeforeReply.push(message.id);
          },
        },
      },
    );
    await waitUntil(`${count} executed messages`, () => executed === count);
    // Assert
    expect(settledBeforeReply).toEqual([]);
    expect(xacks.flat().sort()).toEqual([...ids].sort());
    expect(xacks.length).toBeLessThanOrEqual(count / 10);
    expect(await pendingCount(stream)).toBe(0);
    expect(await consumer.close()).toBe(true);
  }

  it('acks many concurrent messages with a few XACKs, each settled only once its XACK is answered', async () => {
    await expectBatchedAcks('many', 200, client, blocking);
  });

  it('reports every message of a failed XACK, leaves them pending, and acks them on redelivery', async () => {
    // Arrange
    const { stream } = await streamOf('fail', 20);
    const { consumerClient, xacks, control } = recording(client);
    control.failNext = 1;
    const failedAcks: string[] = [];
    let handlerCalls = 0;
    let executed = 0;
    let duplicates = 0;
    // Act
    await startConsumer(
      'fail',
      stream,
      consumerClient,
      () => {
        handlerCalls++;
      },
      {
        concurrency: 20,
        minIdle: 300,
        claimInterval: '50ms',
        hooks: {
          onExecuted: () => void executed++,
          onDuplicate: () => void duplicates++,
          onBrokerError: ({ operation, message }: { operation: string; message: StreamEntry }) => {
            if (operation === 'ack') failedAcks.push(message.id);
          },
        },
      },
    );
    await waitUntil('the first XACK', () => xacks.length > 0);
    const failedBatch = xacks[0]!;
    await waitUntil(
      'the failed batch acked as duplicates',
      () => duplicates === failedBatch.length,
    );
    // Assert
    expect(failedBatch.length).toBeGreaterThan(1);
    expect(failedAcks.sort()).toEqual([...failedBatch].sort());
    // Not acked, so not counted as executed; redelivered by XAUTOCLAIM and acked as duplicates.
    expect(executed).toBe(20 - failedBatch.length);
    expect(xacks.flat()).toHaveLength(20 + failedBatch.length);
    expect(handlerCalls).toBe(20);
    expect(await pendingCount(stream)).toBe(0);
  });

  it('batches the acks of an ioredis client too', async () => {
    const io = new Redis(env.redisUrl);
    const ioBlocking = new Redis(env.redisUrl);
    closers.push(async () => {
      io.disconnect();
      ioBlocking.disconnect();
    });
    await expectBatchedAcks('ioredis', 100, io, ioBlocking);
  });

  it('close() waits for the acks still on their way: nothing is left pending once it resolves', async () => {
    // Arrange
    const { stream } = await streamOf('drain', 30);
    const { consumerClient, control, answered } = recording(client);
    control.delayMs = 300;
    let handlerCalls = 0;
    const consumer = await startConsumer(
      'drain',
      stream,
      consumerClient,
      () => {
        handlerCalls++;
      },
      { concurrency: 30 },
    );
    await waitUntil('30 handler calls', () => handlerCalls === 30);
    // Act: the handlers are done, their acks not yet answered.
    expect(answered.size).toBe(0);
    const drained = await consumer.close();
    // Assert
    expect(drained).toBe(true);
    expect(answered.size).toBe(30);
    expect(await pendingCount(stream)).toBe(0);
  });
});
