/**
 * Redis store throughput: claim + complete pairs per second at 50 concurrent callers, against the same
 * number of raw `SET NX PX` + `SET PX` pairs (the physical floor: two round trips with no logic), measured
 * in the same run on the same client, rounds interleaved. Target: the store at ≥ 80% of the raw pairs.
 * Rows: the floor; the store's single calls (one script call each); the same calls coalesced into
 * `claimMany`/`completeMany` batches (`withBatching`, as the engine does); and the whole engine
 * (`idempotency.run`, key hashing, outcome encoding and lease timer included) with and without batching.
 *
 * Run: `npx tsx bench/redis.ts` (REDIS_URL, default redis://127.0.0.1:6379; PAIRS, default 20000).
 * Keys expire by themselves within a minute.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { createIdempotency } from '../src/index.js';
import { type RedisClientLike, redisStore } from '../src/redis/index.js';
import { withBatching } from '../src/store/batching.js';
import { type BenchRow, median, throughput } from './lib/report.js';
import { ResultsFile } from './lib/results.js';

const results = new ResultsFile('redis');

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const pairs = Number(process.env.PAIRS ?? 20_000);
const concurrency = 50;
const rounds = 3;
const outcome = Buffer.from(JSON.stringify({ status: 201, body: { id: 'ord_123', total: 4200 } }));
const ttl = '60000';

type Raw = (args: string[]) => Promise<unknown>;

async function measure(lib: string, client: RedisClientLike, raw: Raw): Promise<BenchRow[]> {
  const run = randomUUID().slice(0, 8);
  const store = redisStore({ client, prefix: `bench:${run}:store:` });
  await store.ready;
  let round = 0;
  const rawPairs = () => {
    const tag = `bench:${run}:raw:${round++}:`;
    return throughput(pairs, concurrency, async (i) => {
      await raw(['SET', `${tag}${i}`, 'in_progress', 'NX', 'PX', ttl]);
      await raw(['SET', `${tag}${i}`, outcome.toString('latin1'), 'PX', ttl]);
    });
  };
  const storePairs = () => {
    const tag = `${round++}:`;
    return throughput(pairs, concurrency, async (i) => {
      const claim = await store.claim(`${tag}${i}`, { fingerprint: 'fp', leaseMs: 60_000 });
      if (!claim.claimed) throw new Error('bench keys are unique: every claim must win');
      await store.complete(`${tag}${i}`, claim.token, outcome, 60_000);
    });
  };
  const batched = withBatching(store);
  const batchedPairs = () => {
    const tag = `${round++}:`;
    return throughput(pairs, concurrency, async (i) => {
      const claim = await batched.claim(`${tag}${i}`, { fingerprint: 'fp', leaseMs: 60_000 });
      if (!claim.claimed) throw new Error('bench keys are unique: every claim must win');
      await batched.complete(`${tag}${i}`, claim.token, outcome, 60_000);
    });
  };
  const engineRuns = (batch: boolean) => {
    const idempotency = createIdempotency({
      store,
      namespace: `bench-${round++}`,
      retentionMs: '1m',
      ...(batch ? {} : { batch: false as const }),
    });
    const value = { status: 201, body: { id: 'ord_123', total: 4200 } };
    return throughput(pairs, concurrency, async (i) => {
      const result = await idempotency.run({ key: `k${i}` }, () => value);
      if (result.status !== 'executed')
        throw new Error('bench keys are unique: every run executes');
    });
  };
  const cases: Array<[string, () => Promise<number>]> = [
    [`${lib}: raw SET NX PX + SET PX (floor)`, rawPairs],
    [`${lib}: redisStore claim + complete, single calls`, storePairs],
    [`${lib}: redisStore claim + complete, batched (claimMany/completeMany)`, batchedPairs],
    [`${lib}: engine run(), batched (default)`, () => engineRuns(true)],
    [`${lib}: engine run(), batch: false`, () => engineRuns(false)],
  ];
  // Warm-up (connections, script cache, JIT), then interleaved rounds so drift hits all rows alike.
  for (const [, measureOnce] of cases) await measureOnce();
  const rates = cases.map((): number[] => []);
  for (let r = 0; r < rounds; r++) {
    for (const [c, [, measureOnce]] of cases.entries()) rates[c]?.push(await measureOnce());
  }
  const spread = (values: number[]) =>
    values.map((rate) => Math.round(rate).toLocaleString('en-US')).join(' / ');
  return cases.map(([name], c) => ({
    name,
    opsPerSec: median(rates[c] ?? []),
    extra: { rounds: spread(rates[c] ?? []) },
  }));
}

const command = 'npx tsx bench/redis.ts';
const nodeRedis = await createClient({ url }).connect();
results.table(
  `Redis store vs raw SET pairs, node-redis, ${pairs} pairs × ${rounds} rounds, ${concurrency} concurrent (pairs/s, median)`,
  command,
  await measure('node-redis', nodeRedis, (args) => nodeRedis.sendCommand(args)),
);
nodeRedis.destroy();

const ioRedis = new Redis(url);
results.table(
  `Redis store vs raw SET pairs, ioredis, ${pairs} pairs × ${rounds} rounds, ${concurrency} concurrent (pairs/s, median)`,
  command,
  await measure('ioredis', ioRedis, ([name, ...rest]) => ioRedis.call(name!, ...rest)),
);
ioRedis.disconnect();
results.write();
