/**
 * The Redis Streams consumer's script path: msgs/s of a consumer whose handler fails every entry with one
 * delivery allowed (`maxDeliveries: 1`), so that each entry costs one dead-letter script call (the letter's
 * `XADD` and the entry's `XACK` as one script, scripts/dead-letter-2.lua), on the memory store. The
 * executed path of `bench/redis-streams.ts` runs no script at all; this is the path a change in how the
 * scripts are sent (`EVAL` with the source, or `EVALSHA`) shows on.
 *
 * Rows run in order, this checkout first, for `BENCH_ROUNDS` rounds after `BENCH_WARMUP` unrecorded ones;
 * the table shows each row's median, every round, and the median of its same-round ratios to the first.
 * `COMPARE=name=/abs/path/to/src,…` adds a row per variant, loading the library from another source tree
 * compiled the same way (`lib/build-lib.ts`), for before/after figures of a change in one run.
 * `BENCH_MESSAGES` (default 5000), `BENCH_ROUNDS` (3), `BENCH_WARMUP` (1), `BENCH_CONCURRENCY` (100) as in
 * `bench/redis-streams.ts`. Each row also gives the CPU µs per message of this process and of Redis
 * (`/proc`, 10 ms resolution; Redis is shared, so anything else it serves counts too), steadier than msgs/s
 * on a loaded host. Prints its tables; writes no results file.
 *
 * A second table isolates the command itself, without the consumer around it (whose figures a loaded host
 * makes noisy): the same letter written for every entry of a pre-read stream, `BENCH_CONCURRENCY` calls in
 * flight, as `EVAL` with the script's source (how the consumer sent it before) and as `EVALSHA`.
 *
 * Run: `npx tsx bench/redis-streams-dead-letters.ts` (needs Redis on loopback).
 */
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { createClient } from 'redis';
import { loadScript } from '../src/redis/script-runner.js';
import { letterFields } from '../src/redis-streams/deleted-entries.js';
import { parseReadGroup } from '../src/redis-streams/redis-client.js';
import { deadLetter } from '../src/redis-streams/scripts.gen.js';
import { env } from '../test/helpers/env.js';
import { compareVariants, libraryBuilder, repoRoot } from './lib/build-lib.js';
import { type CoreLibrary, libraryModule, loadCoreLibrary } from './lib/library.js';
import { ownCpu, processCpu } from './lib/proc-cpu.js';
import { type BenchRow, median, roundColumns } from './lib/report.js';
import { ResultsFile } from './lib/results.js';

const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 5000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 1);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 100);
const run = randomUUID().slice(0, 8);
const keyPrefix = `ik-bench:streams-dead-letters:${run}:`;
const { buildDir, build } = libraryBuilder('ik-bench-streams-dl-build-');

// Errors surface through the commands' rejections; an 'error' event without a listener would crash.
const client = createClient({ url: env.redisUrl }).on('error', () => {});
const blocking = client.duplicate().on('error', () => {});
await Promise.all([client.connect(), blocking.connect()]);

/** The parts of the library the rows use: this checkout's, or a `COMPARE` variant's. */
interface Library extends CoreLibrary {
  idempotentConsumer: typeof import('../src/redis-streams/index.js').idempotentConsumer;
}

async function loadLibrary(dir: string): Promise<Library> {
  const [core, streams] = await Promise.all([
    loadCoreLibrary(dir),
    libraryModule<typeof import('../src/redis-streams/index.js')>(dir, 'redis-streams/index.js'),
  ]);
  return { ...core, idempotentConsumer: streams.idempotentConsumer };
}

/** Add `count` entries with distinct keys to `stream`, pipelined. */
async function fill(stream: string, count: number): Promise<void> {
  for (let start = 0; start < count; start += 1000) {
    const adds: Array<Promise<unknown>> = [];
    for (let i = start; i < Math.min(start + 1000, count); i++) {
      adds.push(client.sendCommand(['XADD', stream, '*', 'x-idempotency-key', `${stream}:${i}`]));
    }
    await Promise.all(adds);
  }
}

/** Dead-letter every entry of `stream`; msgs/s, timed to the last letter reported. */
async function deadLetterAll(stream: string, count: number, lib: Library): Promise<number> {
  let letters = 0;
  let failed: unknown;
  let done!: () => void;
  const drained = new Promise<void>((resolve) => (done = resolve));
  const started = performance.now();
  const consumer = await lib.idempotentConsumer(
    client,
    () => {
      throw new Error('declined');
    },
    {
      stream,
      group: 'bench',
      name: `bench-dl-${run}`,
      consumer: 'dead-letters',
      idempotency: lib.createIdempotency({ store: lib.memoryStore() }),
      maxDeliveries: 1,
      blockingClient: blocking,
      block: 100,
      concurrency: CONCURRENCY,
      hooks: {
        onDeadLetter: () => {
          if (++letters === count) done();
        },
        // A row whose letters fail would never finish: stop it, saying why.
        onBrokerError: (event) => {
          failed ??= event.error;
          done();
        },
      },
    },
  );
  try {
    await drained;
    if (failed !== undefined) throw new Error(`a letter failed: ${String(failed)}`);
  } finally {
    await consumer.close();
  }
  return count / ((performance.now() - started) / 1000);
}

const letterScript = loadScript(deadLetter);

/** Put every entry of `stream` (`count`) in the pending list of group `calls`; their ids. */
async function readAll(stream: string, count: number): Promise<string[]> {
  await client.sendCommand(['XGROUP', 'CREATE', stream, 'calls', '0']);
  const ids: string[] = [];
  while (ids.length < count) {
    const read = [
      'XREADGROUP',
      'GROUP',
      'calls',
      'reader',
      'COUNT',
      '1000',
      'STREAMS',
      stream,
      '>',
    ];
    const reply = await client.sendCommand(read);
    for (const entry of parseReadGroup(stream, reply).entries) ids.push(entry.id);
  }
  return ids;
}

/** Write every entry's letter with the dead-letter script sent as `how`; letters/s. */
async function letterCalls(stream: string, count: number, how: 'EVAL' | 'EVALSHA') {
  const ids = await readAll(stream, count);
  const script = how === 'EVAL' ? letterScript.source : letterScript.sha;
  const started = performance.now();
  let next = 0;
  const caller = async () => {
    for (let id = ids[next++]; id !== undefined; id = ids[next++]) {
      const fields = letterFields([['x-idempotency-key', Buffer.from(`${stream}:${id}`)]], {
        reason: 'handler_error',
        error: { name: 'Error', message: 'declined' },
        deliveries: 1,
        consumer: 'bench',
        failedAt: new Date().toISOString(),
        entryId: id,
      });
      await client.sendCommand([how, script, '2', stream, `${stream}:dlq`, 'calls', id, ...fields]);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, caller));
  return count / ((performance.now() - started) / 1000);
}

const cases: Array<[string, Library]> = [
  ['dead letter per entry (checkout)', await loadLibrary(build('checkout', join(repoRoot, 'src')))],
];
for (const variant of compareVariants()) {
  cases.push([
    `dead letter per entry [${variant.name}]`,
    await loadLibrary(build(variant.name, variant.src)),
  ]);
}
const rates = cases.map((): number[] => []);
const cpu = cases.map(() => ({ node: 0, redis: 0 }));
const calls = ['EVAL', 'EVALSHA'] as const;
const callRates = calls.map((): number[] => []);
const callCpu = calls.map(() => ({ node: 0, redis: 0 }));
// Cached, as it is after the consumer's first call: SCRIPT LOAD adds it, flushing nothing.
await client.sendCommand(['SCRIPT', 'LOAD', letterScript.source]);
try {
  for (let round = -WARMUP; round < ROUNDS; round++) {
    for (const [index, [, lib]] of cases.entries()) {
      const stream = `${keyPrefix}${round}:${index}`;
      await fill(stream, MESSAGES);
      const before = { node: ownCpu(), redis: processCpu(['redis-server']) };
      const rate = await deadLetterAll(stream, MESSAGES, lib);
      if (round >= 0) {
        rates[index]?.push(rate);
        cpu[index]!.node += ownCpu() - before.node;
        cpu[index]!.redis += processCpu(['redis-server']) - before.redis;
      }
      await client.sendCommand(['DEL', stream, `${stream}:dlq`]);
    }
    for (const [index, how] of calls.entries()) {
      const stream = `${keyPrefix}${round}:calls:${how}`;
      await fill(stream, MESSAGES);
      const before = { node: ownCpu(), redis: processCpu(['redis-server']) };
      const rate = await letterCalls(stream, MESSAGES, how);
      if (round >= 0) {
        callRates[index]?.push(rate);
        callCpu[index]!.node += ownCpu() - before.node;
        callCpu[index]!.redis += processCpu(['redis-server']) - before.redis;
      }
      await client.sendCommand(['DEL', stream, `${stream}:dlq`]);
    }
  }
  const perMessage = (seconds: number) => ((seconds * 1e6) / (MESSAGES * ROUNDS)).toFixed(1);
  const rows: BenchRow[] = cases.map(([name], index) => ({
    name,
    opsPerSec: median(rates[index] ?? []),
    extra: {
      messages: String(MESSAGES),
      concurrency: String(CONCURRENCY),
      ...roundColumns(rates[index] ?? [], rates[0] ?? []),
      'node CPU µs/msg': perMessage(cpu[index]!.node),
      'redis CPU µs/msg': perMessage(cpu[index]!.redis),
    },
  }));
  const settings = Object.entries(process.env)
    .filter(([name]) => name.startsWith('BENCH_') || name === 'COMPARE' || name === 'TSX')
    .map(([name, value]) => `${name}=${value} `)
    .sort()
    .join('');
  const results = new ResultsFile('redis-streams-dead-letters');
  results.table(
    `Redis Streams consumer, every entry dead-lettered (msgs/s, median of ${ROUNDS} rounds)`,
    `${settings}npx tsx bench/redis-streams-dead-letters.ts`,
    rows,
  );
  results.table(
    `The dead-letter script alone, ${CONCURRENCY} calls in flight (letters/s, median of ${ROUNDS} rounds)`,
    `${settings}npx tsx bench/redis-streams-dead-letters.ts`,
    calls.map((how, index) => ({
      name: how === 'EVAL' ? 'EVAL <source> (before)' : 'EVALSHA <sha1> (now)',
      opsPerSec: median(callRates[index] ?? []),
      extra: {
        messages: String(MESSAGES),
        ...roundColumns(callRates[index] ?? [], callRates[0] ?? []),
        'node CPU µs/call': perMessage(callCpu[index]!.node),
        'redis CPU µs/call': perMessage(callCpu[index]!.redis),
      },
    })),
  );
} finally {
  for await (const key of client.scanIterator({ MATCH: `${keyPrefix}*`, COUNT: 1000 })) {
    if (key.length > 0) await client.del(key);
  }
  client.destroy();
  blocking.destroy();
  rmSync(buildDir, { recursive: true, force: true });
}
