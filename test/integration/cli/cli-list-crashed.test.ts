/**
 * `idempotency-kit list --crashed` on PostgreSQL, SQLite and Redis: after requests that died after their
 * charge step, it lists exactly their keys (never a live request's, nor a completed one's), explains each
 * as `inspect` does, pages with `--limit` and `--after`, prints JSON with `--json`, and drops a key once
 * its own request took it over and completed.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { sqliteStore } from '../../../src/sqlite/index.js';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';
import type { CliRun } from '../../helpers/cli.js';
import { crashAfterCharge } from '../../helpers/crashed-request.js';
import { env } from '../../helpers/env.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';
import { redisForFile } from '../../helpers/redis-file-connection.js';

const DAY = 86_400_000;
const dir = mkdtempSync(join(tmpdir(), 'ik-cli-list-'));
const prefix = `ik-test:cli-list:${randomUUID().slice(0, 8)}:`;
const redis = redisForFile('node-redis', prefix);
let postgres: PostgresFixture | undefined;

beforeAll(async () => {
  postgres = await setupPostgres('clilist');
});

afterAll(async () => {
  await postgres?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

/** The keys a page of `list --crashed` printed, in order, and the `--after` it said the next page needs. */
function pageOf(run: CliRun): { keys: string[]; next?: string } {
  expect(run, run.stderr).toMatchObject({ code: 0, stderr: '' });
  const keys = [...run.stdout.matchAll(/^([0-9a-f]{64}): crashed$/gm)].map((m) => m[1] as string);
  // Each key is explained as inspect explains a crashed key.
  const explained = run.stdout.match(
    /^ {2}reserved {5}for its own request until .*\(in 23 h 59 min\)$/gm,
  );
  expect(explained ?? []).toHaveLength(keys.length);
  expect(run.stdout.match(/^ {2}steps {8}charge \(\d+ bytes\)$/gm) ?? []).toHaveLength(keys.length);
  const next = /next page: run again with --after (\S+)\n$/.exec(run.stdout)?.[1];
  return next === undefined ? { keys } : { keys, next };
}

/**
 * Three requests crash after their charge step; one request is live and one completed. The listing, two
 * keys a page, gives the three crashed keys once each (in key order where the store has one); JSON gives
 * the same; once a crashed request is retried and completes, its key is listed no more.
 */
async function listsCrashedKeys(store: Store, storeArgs: string[], keyOrder: boolean) {
  const crashed = await Promise.all([1, 2, 3].map(() => crashAfterCharge(store)));
  const keys = crashed.map((c) => c.storageKey).sort();
  const live = `live-${randomUUID()}`;
  expect(
    await store.claim(live, { fingerprint: 'fp', leaseMs: 60_000, reserveMs: DAY }),
  ).toMatchObject({
    claimed: true,
  });
  const engine = (crashed[0] as (typeof crashed)[number]).idempotency;
  expect(await engine.run({ key: 'done', payload: 1 }, () => 1)).toMatchObject({
    status: 'executed',
  });

  const listed: string[] = [];
  let after: string | undefined;
  let pages = 0;
  do {
    const args = ['list', '--crashed', '--limit', '2', ...storeArgs];
    const page = pageOf(await cli(after === undefined ? args : [...args, '--after', after]));
    expect(page.keys.length).toBeLessThanOrEqual(2);
    if (keyOrder && pages === 0) expect(page).toEqual({ keys: keys.slice(0, 2), next: keys[1] });
    if (keyOrder && pages === 1) expect(page).toEqual({ keys: keys.slice(2) });
    listed.push(...page.keys);
    after = page.next;
    pages++;
  } while (after !== undefined && pages < 20);
  expect(after).toBeUndefined();
  expect(listed.sort()).toEqual(keys);

  const json = await cli(['list', '--crashed', '--json', ...storeArgs]);
  expect(json).toMatchObject({ code: 0, stderr: '' });
  const parsed = JSON.parse(json.stdout) as {
    store: string;
    next?: string;
    keys: Array<{
      storageKey: string;
      state: string;
      now: number;
      record: { leaseUntil: number; reservedUntil: number; steps: Record<string, string> };
    }>;
  };
  expect(parsed.store).toBe(store.name);
  expect(parsed.next).toBeUndefined();
  expect(parsed.keys.map((k) => k.storageKey).sort()).toEqual(keys);
  for (const key of parsed.keys) {
    expect(key.state).toBe('crashed');
    expect(key.record.leaseUntil).toBeLessThanOrEqual(key.now);
    expect(key.record.reservedUntil).toBeGreaterThan(key.now + 86_000_000);
    expect(Buffer.from(key.record.steps.charge as string, 'base64').byteLength).toBeGreaterThan(0);
  }

  // The same request retried takes its key over and completes: the key is crashed no more.
  const [first] = crashed as [(typeof crashed)[number]];
  const retry = await first.idempotency.run(
    { key: first.key, payload: { amount: 5 } },
    async (ctx) => ctx.step('charge', () => ({ id: 'ch_2' })),
  );
  expect(retry).toMatchObject({ status: 'executed', attempt: 2, value: { id: 'ch_1' } });
  const remaining = pageOf(await cli(['list', '--crashed', ...storeArgs]));
  expect(remaining.keys.sort()).toEqual(keys.filter((k) => k !== first.storageKey));
  expect(remaining.next).toBeUndefined();
}

describe('idempotency-kit list --crashed', () => {
  it('on PostgreSQL, a page at a time in key order', async () => {
    if (postgres === undefined) throw new Error('beforeAll did not run');
    const store = postgresStore({ pool: postgres.pool, schema: postgres.schema });
    await listsCrashedKeys(
      store,
      ['--database-url', env.databaseUrl, '--schema', postgres.schema],
      true,
    );
  });

  it('on SQLite, a page at a time in key order', async () => {
    const file = join(dir, 'orders.db');
    const store = sqliteStore({ database: file });
    try {
      await listsCrashedKeys(store, ['--sqlite', file], true);
      // After the last key there is nothing: any key works as --after on a SQL store.
      const end = await cli(['list', '--crashed', '--sqlite', file, '--after', 'f'.repeat(64)]);
      expect(end.stdout).toMatch(/\nno crashed keys\n$/);
    } finally {
      await store.close();
    }
  });

  it('on Redis, under the store’s prefix only, following SCAN positions', async () => {
    const store = redisStore({ client: redis.client, prefix, checkEvictionPolicy: false });
    await listsCrashedKeys(store, ['--redis-url', env.redisUrl, '--prefix', prefix], false);
    // Under another prefix there is nothing of this store's.
    const elsewhere = pageOf(
      await cli(['list', '--crashed', '--redis-url', env.redisUrl, '--prefix', `${prefix}x:`]),
    );
    expect(elsewhere.keys).toEqual([]);
  });

  it('exits 2 for an --after that is not a Redis position, or a list without --crashed', async () => {
    const bad = await cli([
      'list',
      '--crashed',
      '--redis-url',
      env.redisUrl,
      '--prefix',
      prefix,
      '--after',
      'f'.repeat(64),
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/list failed: .*the `next` of a previous page/);
    const bare = await cli(['list', '--redis-url', env.redisUrl]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toMatch(/list needs what to list: --crashed/);
  });
});
