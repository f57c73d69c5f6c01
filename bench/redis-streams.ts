/**
 * Consumer overhead on Redis Streams: msgs/s of a plain consumer-group reader against the idempotent
 * consumer (`idempotency-kit/redis-streams`) on the memory and Redis stores, in the same run. Each row
 * drains its own pre-filled stream of distinct keys (every entry is executed: the worst case). Rows run in
 * order, baseline first, for `BENCH_ROUNDS` rounds after `BENCH_WARMUP` unrecorded ones; the table shows
 * each row's median, every round, and the median of its same-round ratios to the baseline.
 *
 * Fairness: every row reads as the adapter does: `XREADGROUP … COUNT <free slots> BLOCK` on a second
 * connection, at most `BENCH_CONCURRENCY` entries in flight, and acks on the first connection; every row
 * creates its group (`XGROUP CREATE … 0`) after the clock starts, as the adapter does, and is timed to its
 * last ack. All rows share the same two node-redis clients, created with default options as the docs show
 * (`createClient()`), and the plain rows send their commands with the same per-command options as the
 * adapter (`PLAIN_COMMAND_OPTIONS` below), so no row is cheaper for a client setting. The baseline acks
 * each read's entries with one `XACK`, the adapter's shape (it sends the acks of one burst together, and
 * with a handler that returns at once a burst is a read); the second plain row acks each entry with its
 * own `XACK`, as a hand-written reader often does and as the adapter did before it batched. The Redis
 * store shares the consumer's first connection, as in `examples/redis-streams-consumer.ts`.
 *
 * Run: `npx tsx bench/redis-streams.ts` (needs Redis on loopback: `bash scripts/services.sh up`).
 * `BENCH_MESSAGES` sets the entries per row and round (default 5000), `BENCH_ROUNDS` the rounds (default 3),
 * `BENCH_WARMUP` the unrecorded warm-up rounds (default 1) and `BENCH_WARMUP_MESSAGES` their entries per row
 * (default 20000: the idempotent path needs some tens of thousands of messages before V8 has optimised it),
 * `BENCH_ROWS` a comma-separated list of row numbers to run (the baseline, row 0, always runs),
 * `BENCH_CONCURRENCY` the entries in flight (default 100, the prefetch of `bench/consumers.ts`; the adapter's
 * own default is 10). `BENCH_CPU=1` adds CPU µs per message of this process and of Redis (`redis-server`,
 * read from `/proc`: Linux, 10 ms resolution, so use `BENCH_MESSAGES=20000` or more; Redis is shared, so
 * anything else it serves counts too).
 * A run of every row at the default concurrency (no `BENCH_ROWS`, no `COMPARE`) writes the table and its
 * chart to `bench/results/redis-streams.md` and `redis-streams-1.svg`.
 * The idempotent rows load the library compiled with `tsc` into a temporary directory, as users run the
 * published `dist/` (see `lib/build-lib.ts`); `TSX=1` loads the TypeScript sources through tsx instead.
 * `COMPARE=name=/abs/path/to/src,…` adds a memory and a Redis row per variant, loading the library from
 * another source tree compiled the same way, for before/after figures of a change in one run; the results
 * file is then not written.
 */
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { createClient } from 'redis';
import type { Store } from '../src/index.js';
import { parseReadGroup } from '../src/redis-streams/redis-client.js';
import { env } from '../test/helpers/env.js';
import { compareVariants, libraryBuilder, repoRoot } from './lib/build-lib.js';
import { drainWatch } from './lib/drain-watch.js';
import { type CoreLibrary, libraryModule, loadCoreLibrary } from './lib/library.js';
import { ownCpu, processCpu } from './lib/proc-cpu.js';
import { type BenchRow, median, roundColumns } from './lib/report.js';
import { ResultsFile } from './lib/results.js';

const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 5000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 1);
const WARMUP_MESSAGES = Number(process.env.BENCH_WARMUP_MESSAGES ?? 20_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 100);
const ONLY = process.env.BENCH_ROWS?.split(',').map(Number);
const CPU = process.env.BENCH_CPU === '1';
// Short, so that closing a consumer (which waits for its blocking read) does not slow the run; a read
// only blocks once its stream is drained, after the clock has stopped.
const BLOCK_MS = 100;
const GROUP = 'bench';
/**
 * What the plain rows pass to `sendCommand`: what the adapter passes for its own commands
 * (`src/redis-streams/redis-client.ts`), nothing, so node-redis applies its default per-command timeout
 * to both.
 */
const PLAIN_COMMAND_OPTIONS = undefined;
const compare = compareVariants();
const run = randomUUID().slice(0, 8);
const keyPrefix = `ik-bench:streams:${run}:`;
const { buildDir, build } = libraryBuilder('ik-bench-streams-build-');

// Errors surface through the commands' rejections; an 'error' event without a listener would crash.
const client = createClient({ url: env.redisUrl }).on('error', () => {});
const blocking = client.duplicate().on('error', () => {});
await Promise.all([client.connect(), blocking.connect()]);

/** Add `count` entries with distinct keys to `stream`, pipelined (node-redis writes a tick's commands at once). */
async function fill(stream: string, count: number): Promise<void> {
  for (let start = 0; start < count; start += 1000) {
    const adds: Array<Promise<unknown>> = [];
    for (let i = start; i < Math.min(start + 1000, count); i++) {
      adds.push(
        client.sendCommand([
          'XADD',
          stream,
          '*',
          'x-idempotency-key',
          `${stream}:${i}`,
          'n',
          `${i}`,
        ]),
      );
    }
    await Promise.all(adds);
  }
}

/**
 * Drain `stream` with a plain consumer-group reader; msgs/s. Reads as the adapter's loop does (wait for a
 * free slot, then `COUNT` the free slots); `perRead` acks each read's entries with one `XACK`, otherwise
 * each entry gets its own.
 */
async function plain(stream: string, count: number, perRead: boolean): Promise<number> {
  const started = performance.now();
  await client.sendCommand(['XGROUP', 'CREATE', stream, GROUP, '0', 'MKSTREAM']);
  let active = 0;
  let acked = 0;
  let read = 0;
  let wake: (() => void) | undefined;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => {
    done = resolve;
  });
  const settle = (n: number) => {
    active -= n;
    acked += n;
    if (acked === count) done();
    wake?.();
    wake = undefined;
  };
  const ack = (ids: string[]) =>
    client.sendCommand(['XACK', stream, GROUP, ...ids], PLAIN_COMMAND_OPTIONS);
  while (read < count) {
    if (active >= CONCURRENCY) await new Promise<void>((resolve) => (wake = resolve));
    const reply = await blocking.sendCommand(
      [
        'XREADGROUP',
        'GROUP',
        GROUP,
        'plain',
        'COUNT',
        String(CONCURRENCY - active),
        'BLOCK',
        String(BLOCK_MS),
        'STREAMS',
        stream,
        '>',
      ],
      PLAIN_COMMAND_OPTIONS,
    );
    const ids = parseReadGroup(stream, reply).entries.map((entry) => entry.id);
    read += ids.length;
    active += ids.length;
    if (perRead) {
      if (ids.length > 0) void ack(ids).then(() => settle(ids.length));
    } else {
      for (const id of ids) void ack([id]).then(() => settle(1));
    }
  }
  await finished;
  return count / ((performance.now() - started) / 1000);
}

/** The parts of the library the idempotent rows use: this checkout's, or a `COMPARE` variant's. */
interface Library extends CoreLibrary {
  idempotentConsumer: typeof import('../src/redis-streams/index.js').idempotentConsumer;
}

/** Load the library from `dir` (see `lib/library.ts`). */
async function loadLibrary(dir: string): Promise<Library> {
  const [core, streams] = await Promise.all([
    loadCoreLibrary(dir),
    libraryModule<typeof import('../src/redis-streams/index.js')>(dir, 'redis-streams/index.js'),
  ]);
  return { ...core, idempotentConsumer: streams.idempotentConsumer };
}

/** Drain `stream` with the idempotent consumer on `store`; msgs/s. */
async function idempotent(
  stream: string,
  count: number,
  store: Store,
  lib: Library,
): Promise<number> {
  const watch = drainWatch(count);
  const started = performance.now();
  const consumer = await lib.idempotentConsumer(client, async () => {}, {
    stream,
    group: GROUP,
    name: `bench-${run}`,
    consumer: 'idempotent',
    idempotency: lib.createIdempotency({ store, extendLease: true }),
    blockingClient: blocking,
    block: BLOCK_MS,
    concurrency: CONCURRENCY,
    hooks: { onExecuted: watch.onExecuted, onRetry: watch.onRetry },
  });
  try {
    await watch.drained;
  } finally {
    await consumer.close();
  }
  return count / ((performance.now() - started) / 1000);
}

const redisStoreOf = (lib: Library) =>
  lib.redisStore({ client, prefix: keyPrefix, checkEvictionPolicy: false });

const checkout = await loadLibrary(build('checkout', join(repoRoot, 'src')));
const cases: Array<[string, (stream: string, count: number) => Promise<number>]> = [
  ['plain: XREADGROUP COUNT n + one XACK per read', (s, n) => plain(s, n, true)],
  ['plain: XREADGROUP COUNT n + one XACK per entry', (s, n) => plain(s, n, false)],
  ['idempotent, memory store', (s, n) => idempotent(s, n, checkout.memoryStore(), checkout)],
  ['idempotent, Redis store', (s, n) => idempotent(s, n, redisStoreOf(checkout), checkout)],
];
// COMPARE=name=/abs/src,…: a memory and a Redis row per variant, measured in the same rounds as the others.
for (const variant of compare) {
  const lib = await loadLibrary(build(variant.name, variant.src));
  cases.push(
    [
      `idempotent, memory store [${variant.name}]`,
      (s, n) => idempotent(s, n, lib.memoryStore(), lib),
    ],
    [
      `idempotent, Redis store [${variant.name}]`,
      (s, n) => idempotent(s, n, redisStoreOf(lib), lib),
    ],
  );
}

const selected = cases
  .map((c, index) => [c, index] as const)
  .filter(([, index]) => index === 0 || ONLY === undefined || ONLY.includes(index));
const rates = cases.map((): number[] => []);
const cpu = cases.map(() => ({ node: 0, redis: 0 }));
try {
  for (let round = -WARMUP; round < ROUNDS; round++) {
    for (const [[, measure], index] of selected) {
      const stream = `${keyPrefix}${round}:${index}`;
      const count = round < 0 ? WARMUP_MESSAGES : MESSAGES;
      await fill(stream, count);
      const before = CPU ? { node: ownCpu(), redis: processCpu(['redis-server']) } : undefined;
      const rate = await measure(stream, count);
      if (before !== undefined && round >= 0) {
        cpu[index]!.node += ownCpu() - before.node;
        cpu[index]!.redis += processCpu(['redis-server']) - before.redis;
      }
      // Warm-up rounds run every row once, unrecorded, so the JIT has compiled every code path.
      if (round >= 0) rates[index]?.push(rate);
      await client.sendCommand(['DEL', stream, `${stream}:dlq`]);
    }
  }
  const perMessage = (seconds: number) => ((seconds * 1e6) / (MESSAGES * ROUNDS)).toFixed(1);
  const rows: BenchRow[] = selected.map(([[name], index]) => ({
    name,
    opsPerSec: median(rates[index] ?? []),
    extra: {
      messages: String(MESSAGES),
      concurrency: String(CONCURRENCY),
      ...roundColumns(rates[index] ?? [], rates[0] ?? []),
      ...(CPU
        ? {
            'node CPU µs/msg': perMessage(cpu[index]!.node),
            'redis CPU µs/msg': perMessage(cpu[index]!.redis),
          }
        : {}),
    },
  }));
  // The command as run, with the settings that were given, so the file says how to reproduce it.
  const settings = Object.entries(process.env)
    .filter(([name]) => name.startsWith('BENCH_') || name === 'TSX')
    .map(([name, value]) => `${name}=${value} `)
    .sort()
    .join('');
  const results = new ResultsFile('redis-streams');
  results.table(
    `Redis Streams consumer throughput (msgs/s, median of ${ROUNDS} rounds)`,
    `${settings}npx tsx bench/redis-streams.ts`,
    rows,
    { chartTitle: `Redis Streams consumer, ${CONCURRENCY} in flight: idempotent vs plain` },
  );
  // Only a run of every row at the default concurrency replaces the committed results.
  if (ONLY === undefined && CONCURRENCY === 100 && compare.length === 0) results.write();
} finally {
  for await (const key of client.scanIterator({ MATCH: `${keyPrefix}*`, COUNT: 1000 })) {
    if (key.length > 0) await client.del(key);
  }
  client.destroy();
  blocking.destroy();
  rmSync(buildDir, { recursive: true, force: true });
}
