/**
 * Consumer overhead on RabbitMQ: msgs/s of a plain amqplib consumer (ack on receipt) against the
 * idempotent consumer on the memory, Redis and PostgreSQL stores, all at prefetch 100, in the same run.
 * Each row drains its own pre-filled queue of distinct keys (every message is executed: the worst case).
 * The memory store is the ceiling a store could reach (no I/O); the Redis store runs twice, with the
 * engine's default batching (claims and completions coalesced into `claimMany`/`completeMany`) and with
 * `batch: false` (one script call per message and transition). Rows run in order, baseline first, for
 * `BENCH_ROUNDS` rounds; the table shows each row's median and every round.
 *
 * Run: `npx tsx bench/consumers.ts` (needs RabbitMQ, Redis and PostgreSQL on loopback: `bash scripts/services.sh up`).
 * `BENCH_MESSAGES` sets the messages per row and round (default 5000), `BENCH_ROUNDS` the rounds (default 3).
 */
import { randomUUID } from 'node:crypto';
import { type Channel, type ChannelModel, connect } from 'amqplib';
import pg from 'pg';
import { createClient } from 'redis';
import { idempotentConsumer } from '../src/amqp/index.js';
import { createIdempotency, memoryStore, type Store } from '../src/index.js';
import { migrate, postgresStore } from '../src/postgres/index.js';
import { redisStore } from '../src/redis/index.js';
import { env } from '../test/helpers/env.js';
import { type BenchRow, median, printTable } from './lib/report.js';

const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 5000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PREFETCH = 100;
const run = randomUUID().slice(0, 8);

async function fill(channel: Channel & { waitForConfirms(): Promise<void> }, queue: string) {
  await channel.assertQueue(queue, { durable: false });
  for (let i = 0; i < MESSAGES; i++) {
    channel.sendToQueue(queue, Buffer.from(`{"n":${i}}`), { messageId: `${run}-${queue}-${i}` });
    if (i % 500 === 499) await channel.waitForConfirms();
  }
  await channel.waitForConfirms();
}

/** Drain `queue` with a plain consumer; msgs/s. */
async function plain(connection: ChannelModel, queue: string): Promise<number> {
  const channel = await connection.createChannel();
  await channel.prefetch(PREFETCH);
  let seen = 0;
  const started = performance.now();
  await new Promise<void>((resolve) => {
    void channel.consume(queue, (message) => {
      if (message === null) return;
      channel.ack(message);
      if (++seen === MESSAGES) resolve();
    });
  });
  const seconds = (performance.now() - started) / 1000;
  await channel.close();
  return MESSAGES / seconds;
}

/** Drain `queue` with the idempotent consumer on `store`; msgs/s. */
async function idempotent(
  connection: ChannelModel,
  queue: string,
  store: Store,
  batch = true,
): Promise<number> {
  const channel = await connection.createConfirmChannel();
  let executed = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => {
    done = resolve;
  });
  const started = performance.now();
  const consumer = await idempotentConsumer(channel, async () => {}, {
    queue,
    name: `bench-${run}`,
    idempotency: createIdempotency({
      store,
      extendLease: true,
      ...(batch ? {} : { batch: false }),
    }),
    prefetch: PREFETCH,
    concurrency: PREFETCH,
    hooks: {
      onExecuted: () => {
        if (++executed === MESSAGES) done();
      },
    },
  });
  await finished;
  const seconds = (performance.now() - started) / 1000;
  await consumer.close();
  await channel.deleteQueue(`${queue}.retry`);
  await channel.deleteQueue(`${queue}.dlq`);
  await channel.close();
  return MESSAGES / seconds;
}

const connection = await connect(env.amqpUrl);
const filler = await connection.createConfirmChannel();
const redis = createClient({ url: env.redisUrl });
await redis.connect();
const pool = new pg.Pool({ connectionString: env.databaseUrl, max: 20 });
const schema = `ik_bench_consumers_${process.pid}`;
await migrate(pool, { schema });
const redisPrefix = `ik-bench:consumers:${run}:`;

const cases: Array<[string, (queue: string) => Promise<number>]> = [
  ['plain amqplib consumer (ack on receipt)', (q) => plain(connection, q)],
  ['idempotent, memory store', (q) => idempotent(connection, q, memoryStore())],
  [
    'idempotent, Redis store (batched, default)',
    (q) =>
      idempotent(
        connection,
        q,
        redisStore({ client: redis, prefix: redisPrefix, checkEvictionPolicy: false }),
      ),
  ],
  [
    'idempotent, Redis store, batch: false',
    (q) =>
      idempotent(
        connection,
        q,
        redisStore({ client: redis, prefix: redisPrefix, checkEvictionPolicy: false }),
        false,
      ),
  ],
  [
    'idempotent, PostgreSQL store',
    (q) => idempotent(connection, q, postgresStore({ pool, schema })),
  ],
];

const rates = cases.map((): number[] => []);
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const [index, [, measure]] of cases.entries()) {
      const queue = `ik-bench.${run}.${round}.${index}`;
      await fill(filler, queue);
      rates[index]?.push(await measure(queue));
      await filler.deleteQueue(queue);
    }
  }
  const rows: BenchRow[] = cases.map(([name], index) => ({
    name,
    opsPerSec: median(rates[index] ?? []),
    extra: {
      messages: String(MESSAGES),
      prefetch: String(PREFETCH),
      rounds: (rates[index] ?? []).map((r) => Math.round(r).toLocaleString('en-US')).join(' / '),
    },
  }));
  printTable(
    `RabbitMQ consumer throughput (msgs/s, median of ${ROUNDS} rounds)`,
    'npx tsx bench/consumers.ts',
    rows,
  );
} finally {
  for await (const key of redis.scanIterator({ MATCH: `${redisPrefix}*`, COUNT: 1000 })) {
    if (key.length > 0) await redis.del(key);
  }
  await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  await pool.end();
  redis.destroy();
  await connection.close();
}
