/**
 * Applications sharing one Redis, each under its own `prefix`: the SCAN-based tools (`stats`, `listCrashed`)
 * of one never count or list another's records, also when one prefix starts another (`a` and `ab`, `app`
 * and `app:`) or holds glob characters, which `MATCH` would otherwise read as a pattern.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../../../src/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { env } from '../../helpers/env.js';

const base = `idemtest:prefixes:${randomUUID().slice(0, 8)}:`;
const client = new Redis(env.redisUrl);
const DAY = 86_400_000;

// Another application's hash-tagged keys (`{…}`), in the same database.
const foreign = [`{${base}user}`, `{${base}job}`];

afterAll(async () => {
  await client.del(...foreign);
  const keys = await client.keys(`${base}*`);
  if (keys.length > 0) await client.del(...keys);
  client.disconnect();
});

describe('redis stores under prefixes that start one another', () => {
  it('count and list only their own records', async () => {
    const suffixes = ['a', 'ab', 'app', 'app:', 'a*', 'a?', 'a[b]', 'a\\'];
    const stores = suffixes.map((suffix) => redisStore({ client, prefix: `${base}${suffix}` }));
    // Store i holds i + 1 completed records and i + 1 crashed claims, the same client keys in each.
    for (const [i, store] of stores.entries()) {
      const idempotency = createIdempotency({ store, namespace: 'shared' });
      for (let n = 0; n <= i; n++) {
        await idempotency.run({ key: `done-${n}` }, async () => n);
        await store.claim(`crashed-${n}`, { fingerprint: 'fp', leaseMs: 1, reserveMs: DAY });
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
    for (const [i, store] of stores.entries()) {
      const stats = await store.stats();
      expect({ prefix: suffixes[i], completed: stats.completed, stale: stats.staleLeases }).toEqual(
        {
          prefix: suffixes[i],
          completed: i + 1,
          stale: i + 1,
        },
      );
      const listed: string[] = [];
      let after: string | undefined;
      do {
        const page = await store.listCrashed({ limit: 100, ...(after !== undefined && { after }) });
        listed.push(...page.records.map((record) => record.key));
        after = page.next;
      } while (after !== undefined);
      expect(listed.sort()).toEqual(Array.from({ length: i + 1 }, (_, n) => `crashed-${n}`).sort());
    }
  });

  it("refuses an empty prefix, whose scans would take another application's `{…}` keys for records", async () => {
    // Arrange: the other application's keys, one of them shaped like a crashed claim, and a store under a
    // prefix beside them.
    await client.set(foreign[0] as string, 'alice', 'PX', DAY);
    await client.set(foreign[1] as string, 'p|1|1|1|1|fp', 'PX', DAY);
    const store = redisStore({ client, prefix: `${base}own:` });
    await store.claim('crashed', { fingerprint: 'fp', leaseMs: 1, reserveMs: DAY });
    await new Promise((resolve) => setTimeout(resolve, 20));
    // Act
    const refused = (() => {
      try {
        redisStore({ client, prefix: '' });
        return undefined;
      } catch (error) {
        return error;
      }
    })();
    const stats = await store.stats();
    const page = await store.listCrashed({ limit: 100 });
    // Assert: '' is refused at creation; a prefix sees its own records only.
    expect(refused).toMatchObject({
      code: 'invalid_options',
      message: expect.stringMatching(/`prefix` must not be empty/),
    });
    expect({ completed: stats.completed, stale: stats.staleLeases }).toEqual({
      completed: 0,
      stale: 1,
    });
    expect(page.records.map((record) => record.key)).toEqual(['crashed']);
  });
});
