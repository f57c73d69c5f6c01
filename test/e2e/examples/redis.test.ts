/**
 * The Redis examples keep doing what their docs say, each run as a real process against the local Redis.
 * The consumer example gets names of this run (`EXAMPLE_RUN`); the two with a fixed key prefix write
 * records under unique keys, and only the keys that appeared during their run are deleted afterwards.
 */
import { randomUUID } from 'node:crypto';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { env, requireService } from '../../helpers/env.js';
import { deleteKeys } from '../../helpers/redis-clients.js';
import { assertExitedCleanly, runExample } from '../../helpers/run-example.js';

const client = createClient({ url: env.redisUrl });
client.on('error', () => {});

/** The keys matching `pattern` now. */
async function keys(pattern: string): Promise<Set<string>> {
  const found = new Set<string>();
  let cursor = '0';
  do {
    const [next, page] = (await client.sendCommand([
      'SCAN',
      cursor,
      'MATCH',
      pattern,
      'COUNT',
      '1000',
    ])) as [string, string[]];
    cursor = next;
    for (const key of page) found.add(key);
  } while (cursor !== '0');
  return found;
}

/**
 * Run `file`, whose records go under `prefix`, and delete the records it wrote (those that were not there
 * before it ran; the example's keys are unique per run). Returns its output.
 */
async function runWithFixedPrefix(file: string, prefix: string): Promise<string> {
  const pattern = `${prefix}{*`;
  const before = await keys(pattern);
  try {
    const result = await runExample(file);
    assertExitedCleanly(file, result);
    return result.stdout;
  } finally {
    const written = [...(await keys(pattern))].filter((key) => !before.has(key));
    if (written.length > 0) await client.unlink(written);
  }
}

beforeAll(async () => {
  await requireService('Redis', env.redisUrl);
  await client.connect();
});
afterAll(() => {
  client.destroy();
});

describe('Redis examples', () => {
  it('redis-store.ts: the second run() with the same key replays the first outcome', async () => {
    const output = await runWithFixedPrefix('redis-store.ts', 'example:orders:');
    const executed =
      /executed \{\n {2}orderId: '(ord_\d+)',\n {2}paymentKey: '(ik_[0-9a-f]+)'\n\}\n/.exec(output);
    expect(executed, output).not.toBeNull();
    expect(output).toContain(
      `replayed {\n  orderId: '${executed?.[1]}',\n  paymentKey: '${executed?.[2]}'\n}\n`,
    );
    expect(output).toContain('executions: 1\n');
  });

  it('express-redis.ts: a retry with another load-balancer cookie is a replay; int64 ids told apart; 400 without a key', async () => {
    const output = await runWithFixedPrefix('express-redis.ts', 'example:http:');
    const lines = output.split('\n');
    const created =
      /^201 - (\{"order":\{"id":"ord_1","sku":"book".*"paymentKey":"ik_[0-9a-f]+"\})$/.exec(
        lines[0] ?? '',
      );
    expect(created, output).not.toBeNull();
    expect(lines[1]).toBe(`201 true ${created?.[1]}`);
    expect(lines[2]).toBe('422 key_mismatch');
    expect(lines[3]).toMatch(/^400 \{.*"code":"missing_key"/);
    expect(lines[4]).toBe('handler ran 1 time(s)');
  });

  describe('redis-streams-consumer.ts', () => {
    const run = `exs-${randomUUID().slice(0, 8)}`;
    const stream = `example:orders:${run}`;

    afterAll(async () => {
      await client.unlink([stream, `${stream}:dlq`]);
      await deleteKeys(client, `example:${run}:`);
    });

    it('ships the order added twice once, and deletes its stream', async () => {
      const result = await runExample('redis-streams-consumer.ts', {
        env: { REDIS_URL: env.redisUrl, EXAMPLE_RUN: run },
      });
      assertExitedCleanly('redis-streams-consumer.ts', result);
      expect(
        result.stdout.match(/^shipping order-1001 \(entry \d+-\d+\)$/gm),
        result.stdout,
      ).toHaveLength(1);
      expect(result.stdout).toContain('shipped 1 time(s)\n');
      expect(await client.exists([stream, `${stream}:dlq`])).toBe(0);
      // Its records are under this run's prefix, not one a later run could share.
      expect((await keys(`example:${run}:{*`)).size).toBeGreaterThan(0);
    });
  });
});
