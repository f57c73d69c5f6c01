/**
 * Consumer overhead on RabbitMQ: msgs/s of a plain amqplib consumer (ack on receipt) against the
 * idempotent consumer on the memory, Redis and PostgreSQL stores, all at prefetch 100, in the same run.
 * Each row drains its own pre-filled queue of distinct keys (every message is executed: the worst case).
 * The memory store is the ceiling a store could reach (no I/O); the Redis store runs twice, with the
 * engine's default batching (claims and completions coalesced into `claimMany`/`completeMany`) and with
 * `batch: false` (one script call per message and transition). Rows run in order, baseline first, for
 * `BENCH_ROUNDS` rounds after `BENCH_WARMUP` unrecorded ones; the table shows each row's median, every
 * round, and the median of its same-round ratios to the baseline.
 *
 * Fairness: every row consumes a non-durable queue filled the same way, at prefetch 100, and is timed
 * from its `consume` call to its last ack (the idempotent rows' retry and dead-letter queues are declared
 * before the clock starts). The plain rows ack each message on its own, as the issue specifies; the
 * idempotent consumer acks only once a completion is durable, and sends the acks it decides in one turn
 * of the event loop together, as a multiple ack when they form a prefix of its deliveries
 * (`src/amqp/acks.ts`): that is the consumer's own behaviour, and part of what is measured. It needs a
 * confirm channel (its retry and dead-letter copies must be confirmed before the original is acked); the
 * `plain … confirm channel` row shows that confirm mode costs a consumer nothing (confirms concern
 * publishes only, and no row publishes while consuming).
 *
 * Run: `npx tsx bench/consumers.ts` (needs RabbitMQ, Redis and PostgreSQL on loopback: `bash scripts/services.sh up`).
 * `BENCH_MESSAGES` sets the messages per row and round (default 5000), `BENCH_ROUNDS` the rounds (default 3),
 * `BENCH_WARMUP` the unrecorded warm-up rounds run first (default 1) and `BENCH_WARMUP_MESSAGES` their
 * messages per row (default 20000: the idempotent path needs some tens of thousands of messages before V8
 * has optimised it, where the plain consumer's much smaller path is hot within a few thousand),
 * `BENCH_ROWS` a comma-separated list of row numbers to run (the baseline, row 0, always runs).
 * `BENCH_CPU=1` adds CPU µs per message of this process, RabbitMQ (`beam.smp`), Redis and PostgreSQL, read
 * from `/proc` (Linux; 10 ms resolution, so use `BENCH_MESSAGES=20000` or more), and this process's read
 * and write system calls per 100 messages.
 * `BENCH_PREFETCH` changes the prefetch (default 100, the issue's): a larger window shows how far a row is
 * bound by the time each message holds its slot rather than by CPU.
 * A run of every row at prefetch 100 (no `BENCH_ROWS`, no `BENCH_PROFILE`) writes the table and its chart to
 * `bench/results/consumers.md` and `consumers-1.svg`.
 * The idempotent rows load the library compiled with `tsc` into a temporary directory, as users run the
 * published `dist/` (see `lib/build-lib.ts`); `TSX=1` loads the TypeScript sources through tsx instead.
 * `COMPARE=name=/abs/path/to/src,…` adds a Redis row per variant, loading the library from another source
 * tree (a snapshot of `src/`, compiled the same way), for before/after figures of a change in one run; the
 * results file is then not written.
 * `PG_AT=<n>` adds a PostgreSQL row, last, on a schema migrated only up to migration `n`: a later
 * migration's effect in the same run (`PG_AT=6`: 0007, batch functions planned once per connection).
 * `BENCH_PROFILE=<dir>` writes a V8 CPU profile of this process per measured row and round, covering only the
 * consuming (not the filling), as `<dir>/<row>-<round>.cpuprofile` (open it in Chrome DevTools).
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import { type Channel, type ChannelModel, type ConsumeMessage, connect } from 'amqplib';
import pg from 'pg';
import { createClient } from 'redis';
import type { Store } from '../src/index.js';
import { env } from '../test/helpers/env.js';
import { migrateUpTo, pgAtVersion, schemaAtLabel } from './lib/bench-stores.js';
import { compareVariants, libraryBuilder, repoRoot } from './lib/build-lib.js';
import { drainWatch } from './lib/drain-watch.js';
import { type CoreLibrary, libraryModule, loadCoreLibrary } from './lib/library.js';
import { processCpu } from './lib/proc-cpu.js';
import { type BenchRow, median, roundColumns } from './lib/report.js';
import { ResultsFile } from './lib/results.js';
import { inRoundOrder } from './lib/round-order.js';

const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 5000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 1);
// V8 needs some tens of thousands of messages before the idempotent path runs optimised code.
const WARMUP_MESSAGES = Number(process.env.BENCH_WARMUP_MESSAGES ?? 20_000);
// The issue measures at prefetch 100; BENCH_PREFETCH shows how far the idempotent row is bound by its window.
const PREFETCH = Number(process.env.BENCH_PREFETCH ?? 100);
const ONLY = process.env.BENCH_ROWS?.split(',').map(Number);
const CPU = process.env.BENCH_CPU === '1';
const PROFILE = process.env.BENCH_PROFILE;
const compare = compareVariants();
const run = randomUUID().slice(0, 8);
const { buildDir, build } = libraryBuilder('ik-bench-consumers-build-');

const CPU_SOURCES: Record<string, string[]> = {
  node: [],
  rabbitmq: ['beam.smp'],
  redis: ['redis-server'],
  postgres: ['postgres'],
};

/** CPU seconds so far, per source. */
function cpuSnapshot(): Record<string, number> {
  const out: Record<string, number> = {};
  // Socket writes and reads cost this machine tens of µs each (loopback TCP does the receiver's work in
  // the sender's system call), so their count per message is worth watching next to the CPU time.
  const io = readFileSync('/proc/self/io', 'utf8');
  out['node write syscalls'] = Number(/syscw: (\d+)/.exec(io)?.[1] ?? 0);
  out['node read syscalls'] = Number(/syscr: (\d+)/.exec(io)?.[1] ?? 0);
  for (const [source, names] of Object.entries(CPU_SOURCES)) {
    if (source === 'node') {
      const { user, system } = process.cpuUsage();
      out[source] = (user + system) / 1e6;
    } else out[source] = processCpu(names);
  }
  return out;
}

async function fill(
  channel: Channel & { waitForConfirms(): Promise<void> },
  queue: string,
  count: number,
) {
  await channel.assertQueue(queue, { durable: false });
  for (let i = 0; i < count; i++) {
    channel.sendToQueue(queue, Buffer.from(`{"n":${i}}`), { messageId: `${run}-${queue}-${i}` });
    if (i % 500 === 499) await channel.waitForConfirms();
  }
  await channel.waitForConfirms();
}

/** Drain `queue` with a plain consumer (ack per message); msgs/s. */
async function plain(
  connection: ChannelModel,
  queue: string,
  count: number,
  confirm = false,
): Promise<number> {
  const channel = confirm
    ? await connection.createConfirmChannel()
    : await connection.createChannel();
  await channel.prefetch(PREFETCH);
  let seen = 0;
  const started = performance.now();
  await new Promise<void>((resolve) => {
    void channel.consume(queue, (message) => {
      if (message === null) return;
      channel.ack(message);
      if (++seen === count) resolve();
    });
  });
  const seconds = (performance.now() - started) / 1000;
  await channel.close();
  return count / seconds;
}

/**
 * Drain `queue` with a plain consumer that makes two Redis round trips (PING) between receipt and ack, as a
 * claim before the handler and a completion before the ack would: the floor of any consumer that claims
 * before running the handler and acks only once its completion is durable, with no store work at all. It
 * batches as the idempotent consumer does: the deliveries of one tick share their two PINGs and one
 * multiple ack (round trips on one connection complete in order, so every earlier tag is acked by then).
 */
async function floor(connection: ChannelModel, queue: string, count: number): Promise<number> {
  const channel = await connection.createChannel();
  await channel.prefetch(PREFETCH);
  let seen = 0;
  let batch: ConsumeMessage[] = [];
  const started = performance.now();
  await new Promise<void>((resolve) => {
    const flush = () => {
      const messages = batch;
      batch = [];
      void redis
        .ping()
        .then(() => redis.ping())
        .then(() => {
          channel.ack(messages[messages.length - 1]!, true);
          seen += messages.length;
          if (seen === count) resolve();
        });
    };
    void channel.consume(queue, (message) => {
      if (message === null) return;
      if (batch.push(message) === 1) process.nextTick(flush);
    });
  });
  const seconds = (performance.now() - started) / 1000;
  await channel.close();
  return count / seconds;
}

/** The parts of the library the idempotent rows use: this checkout's, or a `COMPARE` variant's. */
interface Library extends CoreLibrary {
  idempotentConsumer: typeof import('../src/amqp/index.js').idempotentConsumer;
  postgresStore: typeof import('../src/postgres/index.js').postgresStore;
  migrate: typeof import('../src/postgres/index.js').migrate;
}

/** Load the library from `dir` (see `lib/library.ts`). */
async function loadLibrary(dir: string): Promise<Library> {
  const [core, amqp, postgres] = await Promise.all([
    loadCoreLibrary(dir),
    libraryModule<typeof import('../src/amqp/index.js')>(dir, 'amqp/index.js'),
    libraryModule<typeof import('../src/postgres/index.js')>(dir, 'postgres/index.js'),
  ]);
  return {
    ...core,
    idempotentConsumer: amqp.idempotentConsumer,
    postgresStore: postgres.postgresStore,
    migrate: postgres.migrate,
  };
}

const checkout = await loadLibrary(build('checkout', join(repoRoot, 'src')));

/** Drain `queue` with the idempotent consumer on `store`; msgs/s. */
async function idempotent(
  connection: ChannelModel,
  queue: string,
  count: number,
  store: Store,
  batch = true,
  lib: Library = checkout,
): Promise<number> {
  const channel = await connection.createConfirmChannel();
  // Declared before the clock starts, as the plain rows' queue is: only consuming is timed.
  await channel.assertQueue(`${queue}.retry`, {
    durable: true,
    arguments: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': queue },
  });
  await channel.assertQueue(`${queue}.dlq`, { durable: true });
  const watch = drainWatch(count);
  const started = performance.now();
  const consumer = await lib.idempotentConsumer(channel, async () => {}, {
    queue,
    name: `bench-${run}`,
    idempotency: lib.createIdempotency({
      store,
      extendLease: true,
      ...(batch ? {} : { batch: false }),
    }),
    declare: false,
    prefetch: PREFETCH,
    concurrency: PREFETCH,
    hooks: { onExecuted: watch.onExecuted, onRetry: watch.onRetry },
  });
  try {
    await watch.drained;
  } catch (error) {
    await consumer.close();
    throw error;
  }
  const seconds = (performance.now() - started) / 1000;
  await consumer.close();
  await channel.deleteQueue(`${queue}.retry`);
  await channel.deleteQueue(`${queue}.dlq`);
  await channel.close();
  return count / seconds;
}

const connection = await connect(env.amqpUrl);
const filler = await connection.createConfirmChannel();
// No per-command timeout of node-redis's own, as the store sends its commands (src/redis/client.ts): the
// floor's PINGs must cost what the store's commands cost.
const redis = createClient({ url: env.redisUrl, commandOptions: { timeout: 0 } });
await redis.connect();
const pool = new pg.Pool({ connectionString: env.databaseUrl, max: 20 });
// COMPARE's variants are built and loaded first: a build that fails then stops the run before it has
// created anything to clean up.
const variants = await Promise.all(
  compare.map(async (variant) => ({
    name: variant.name,
    lib: await loadLibrary(build(variant.name, variant.src)),
  })),
);
const schema = `ik_bench_consumers_${process.pid}`;
await checkout.migrate(pool, { schema });
const redisPrefix = `ik-bench:consumers:${run}:`;

const profiler = new Session();
if (PROFILE !== undefined) {
  mkdirSync(PROFILE, { recursive: true });
  profiler.connect();
  await profiler.post('Profiler.enable');
}

const cases: Array<[string, (queue: string, count: number) => Promise<number>]> = [
  ['plain amqplib consumer (ack on receipt)', (q, n) => plain(connection, q, n)],
  ['plain amqplib consumer, confirm channel', (q, n) => plain(connection, q, n, true)],
  ['idempotent, memory store', (q, n) => idempotent(connection, q, n, checkout.memoryStore())],
  ['floor: plain + 2 Redis round trips per burst', (q, n) => floor(connection, q, n)],
  [
    'idempotent, Redis store (batched, default)',
    (q, n) =>
      idempotent(
        connection,
        q,
        n,
        checkout.redisStore({ client: redis, prefix: redisPrefix, checkEvictionPolicy: false }),
      ),
  ],
  [
    'idempotent, Redis store, batch: false',
    (q, n) =>
      idempotent(
        connection,
        q,
        n,
        checkout.redisStore({ client: redis, prefix: redisPrefix, checkEvictionPolicy: false }),
        false,
      ),
  ],
  [
    'idempotent, PostgreSQL store',
    (q, n) => idempotent(connection, q, n, checkout.postgresStore({ pool, schema })),
  ],
];

// COMPARE=name=/abs/src,…: one more Redis row per variant, measured in the same rounds as the others.
for (const { name, lib } of variants) {
  cases.push([
    `idempotent, Redis store (batched, default) [${name}]`,
    (q, n) =>
      idempotent(
        connection,
        q,
        n,
        lib.redisStore({ client: redis, prefix: redisPrefix, checkEvictionPolicy: false }),
        true,
        lib,
      ),
  ]);
}

// PG_AT=n: the PostgreSQL row once more, on a schema that stops at migration n.
const pgAt = pgAtVersion();
const schemaAt = pgAt === undefined ? undefined : `${schema}_at${pgAt}`;
if (pgAt !== undefined && schemaAt !== undefined) {
  await migrateUpTo(pool, schemaAt, pgAt);
  cases.push([
    `idempotent, PostgreSQL store, ${schemaAtLabel(pgAt)}`,
    (q, n) => idempotent(connection, q, n, checkout.postgresStore({ pool, schema: schemaAt })),
  ]);
}

const selected = cases
  .map((c, index) => [c, index] as const)
  .filter(([, index]) => index === 0 || ONLY === undefined || ONLY.includes(index));
const rates = cases.map((): number[] => []);
const cpu = cases.map((): Record<string, number> => ({}));
try {
  for (let round = -WARMUP; round < ROUNDS; round++) {
    for (const [[, measure], index] of inRoundOrder(selected, round + WARMUP)) {
      const queue = `ik-bench.${run}.${round}.${index}`;
      const count = round < 0 ? WARMUP_MESSAGES : MESSAGES;
      await fill(filler, queue, count);
      const before = CPU ? cpuSnapshot() : {};
      const profiling = PROFILE !== undefined && round >= 0;
      if (profiling) await profiler.post('Profiler.start');
      const rate = await measure(queue, count);
      if (profiling) {
        const { profile } = await profiler.post('Profiler.stop');
        writeFileSync(join(PROFILE, `${index}-${round}.cpuprofile`), JSON.stringify(profile));
      }
      // Warm-up rounds run every row once, unrecorded, so the JIT has compiled both code paths.
      if (round >= 0) rates[index]?.push(rate);
      if (CPU && round >= 0) {
        const after = cpuSnapshot();
        for (const source of Object.keys(after)) {
          const spent = (after[source] ?? 0) - (before[source] ?? 0);
          cpu[index]![source] = (cpu[index]![source] ?? 0) + spent;
        }
      }
      await filler.deleteQueue(queue);
    }
  }
  const rows: BenchRow[] = selected.map(([[name], index]) => ({
    name,
    opsPerSec: median(rates[index] ?? []),
    extra: {
      messages: String(MESSAGES),
      prefetch: String(PREFETCH),
      ...roundColumns(rates[index] ?? [], rates[0] ?? []),
      ...(CPU
        ? Object.fromEntries(
            Object.entries(cpu[index] ?? {}).map(([source, value]) =>
              source.endsWith('syscalls')
                ? [`${source}/100 msgs`, ((value * 100) / (MESSAGES * ROUNDS)).toFixed(1)]
                : [`${source} CPU µs/msg`, ((value * 1e6) / (MESSAGES * ROUNDS)).toFixed(1)],
            ),
          )
        : {}),
    },
  }));
  // The command as run, with the settings that were given, so the file says how to reproduce it.
  const settings = Object.entries(process.env)
    .filter(([name]) => name.startsWith('BENCH_') || name === 'TSX' || name === 'PG_AT')
    .map(([name, value]) => `${name}=${value} `)
    .sort()
    .join('');
  const results = new ResultsFile('consumers');
  results.table(
    `RabbitMQ consumer throughput (msgs/s, median of ${ROUNDS} rounds)`,
    `${settings}npx tsx bench/consumers.ts`,
    rows,
    {
      chartTitle: `RabbitMQ consumer, prefetch ${PREFETCH}: idempotent vs plain`,
      targets: [{ ratio: 0.7, label: 'target, Redis store' }],
    },
  );
  // Only a run of every row, unprofiled, at the prefetch, replaces the committed results.
  if (
    ONLY === undefined &&
    PROFILE === undefined &&
    PREFETCH === 100 &&
    compare.length === 0 &&
    pgAt === undefined
  ) {
    results.write();
  }
} finally {
  for await (const key of redis.scanIterator({ MATCH: `${redisPrefix}*`, COUNT: 1000 })) {
    if (key.length > 0) await redis.del(key);
  }
  await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  if (schemaAt !== undefined) await pool.query(`DROP SCHEMA IF EXISTS "${schemaAt}" CASCADE`);
  await pool.end();
  redis.destroy();
  await connection.close();
  rmSync(buildDir, { recursive: true, force: true });
}
